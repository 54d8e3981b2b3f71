//! The defaults a task's left-out fields take. The server reads them from its flags and
//! their variables at start (`stepwise serve --help`, "Task defaults") and hands them to
//! normalization and to the task form; they are plain data here because this crate also
//! runs in the browser, which has no environment to read.

use serde::{Deserialize, Serialize};

use crate::modes::{PublishMode, RuntimeMode};

/// Model and effort used when a task names the runtime but not these.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeDefaults {
    pub model: Option<String>,
    pub effort: Option<String>,
}

/// Serializable so the server can hand them to the UI to prefill the submit form.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Defaults {
    pub runtime: RuntimeMode,
    pub publish_mode: PublishMode,
    /// Whether a task that does not say (`task.publish.approval`) waits for an operator's
    /// approval before publishing.
    #[serde(default)]
    pub approval_required: bool,
    /// The price limit (`task.budget.maxCostUsd`) of a task that sets none, where its
    /// runtime reports a price (`--default-budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    pub codex: RuntimeDefaults,
    pub claude: RuntimeDefaults,
    pub gemini: RuntimeDefaults,
}

impl Defaults {
    pub fn for_runtime(&self, runtime: RuntimeMode) -> &RuntimeDefaults {
        match runtime {
            RuntimeMode::Codex => &self.codex,
            RuntimeMode::Claude => &self.claude,
            RuntimeMode::Gemini => &self.gemini,
        }
    }
}
