//! The closed vocabularies of a task: which agent CLI runs it and how its result is published.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::wire_names;

/// The agent CLI that executes every step of a task.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeMode {
    #[default]
    Codex,
    Claude,
    Gemini,
}

// The wire spelling is also the worker capability that runtime needs.
wire_names!(RuntimeMode, "runtime", lenient {
    Codex = "codex",
    Claude = "claude",
    Gemini = "gemini",
});

impl RuntimeMode {
    /// Reasoning-effort levels the runtime's CLI understands, lowest first. The task form,
    /// REST, the CLI and the worker all take them from here.
    ///
    /// codex passes its effort to the API unchecked: these are the levels its bundled
    /// models list (every one has low…xhigh, most `max`, some `ultra`; none `minimal` any
    /// more), and a model that lacks one answers with an error the step reports.
    pub fn efforts(self) -> &'static [&'static str] {
        match self {
            RuntimeMode::Codex => &["low", "medium", "high", "xhigh", "max", "ultra"],
            RuntimeMode::Claude => &["low", "medium", "high", "xhigh", "max"],
            RuntimeMode::Gemini => &["low", "medium", "high"],
        }
    }

    /// How a newcomer makes this runtime run on a worker's machine: the npm package that
    /// ships the CLI, and where its credential comes from. The task form shows it beside a
    /// runtime that is not installed; the README says the same.
    pub fn install_hint(self) -> &'static str {
        match self {
            RuntimeMode::Codex => {
                "npm install -g @openai/codex, then CODEX_API_KEY (or OPENAI_API_KEY) in the                  worker's environment, or `codex login` and --share-logins"
            }
            RuntimeMode::Claude => {
                "npm install -g @anthropic-ai/claude-code, then ANTHROPIC_API_KEY in the                  worker's environment, or claude's /login and --share-logins"
            }
            RuntimeMode::Gemini => {
                "npm install -g @google/gemini-cli, then GEMINI_API_KEY in the worker's                  environment, or gemini's Login with Google and --share-logins"
            }
        }
    }
}

/// What happens to the agent's changes once every step has succeeded.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PublishMode {
    None,
    Branch,
    #[default]
    Pr,
}

wire_names!(PublishMode, "publish mode", lenient {
    None = "none",
    Branch = "branch",
    Pr = "pr",
});

/// A string that is none of the values a mode accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseModeError {
    /// Which vocabulary was parsed ("runtime" or "publish mode").
    pub kind: &'static str,
    pub value: String,
    pub accepted: &'static [&'static str],
}

impl fmt::Display for ParseModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} `{}`; use one of: {}",
            self.kind,
            self.value,
            self.accepted.join(", ")
        )
    }
}

impl std::error::Error for ParseModeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_ignores_case_and_surrounding_space() {
        assert_eq!(" Claude ".parse::<RuntimeMode>(), Ok(RuntimeMode::Claude));
        assert_eq!("PR".parse::<PublishMode>(), Ok(PublishMode::Pr));
        let err = "cursor".parse::<RuntimeMode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown runtime `cursor`; use one of: codex, claude, gemini"
        );
    }
}
