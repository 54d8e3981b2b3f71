//! What a client sends to create a job: the types the web UI builds and serializes.
//!
//! Almost everything is optional here because the server fills the gaps from
//! [`Defaults`](crate::Defaults); [`normalize`](crate::normalize()) turns a request into
//! the fully resolved [`NormalizedTask`](crate::NormalizedTask). The leaf types at the
//! bottom are shared by both shapes. `None` serializes as `null`, which the normalizer
//! treats exactly like an absent field.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::limits;
use crate::modes::{PublishMode, RuntimeMode};

/// The kind of queue job. Only tasks exist today; the field is kept so the envelope can
/// grow other job kinds without a breaking change.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobType {
    #[default]
    Task,
}

impl JobType {
    pub fn as_str(self) -> &'static str {
        match self {
            JobType::Task => "task",
        }
    }
}

/// The job-create request envelope.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobRequest {
    #[serde(rename = "type")]
    pub job_type: JobType,
    pub priority: i32,
    pub max_attempts: u32,
    pub affinity_key: Option<String>,
    pub payload: PayloadInput,
}

impl Default for JobRequest {
    fn default() -> Self {
        JobRequest {
            job_type: JobType::Task,
            priority: limits::DEFAULT_PRIORITY,
            max_attempts: limits::DEFAULT_MAX_ATTEMPTS,
            affinity_key: None,
            payload: PayloadInput::default(),
        }
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PayloadInput {
    #[serde(alias = "repo")]
    pub repository: String,
    pub target_runtime: Option<RuntimeMode>,
    /// Extra capabilities the client wants; the derived ones are added by normalization.
    pub required_capabilities: Vec<String>,
    pub auth: AuthRefs,
    pub task: TaskInput,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskInput {
    /// The task objective; every step's prompt starts with it.
    pub instructions: String,
    pub skill: Option<SkillSelection>,
    pub runtime: RuntimeInput,
    pub git: GitSettings,
    pub publish: PublishInput,
    pub steps: Vec<StepInput>,
    pub container: ContainerSpec,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RuntimeInput {
    pub mode: Option<RuntimeMode>,
    pub model: Option<String>,
    pub effort: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PublishInput {
    pub mode: Option<PublishMode>,
    pub pr_base_branch: Option<String>,
    pub commit_message: Option<String>,
    pub pr_title: Option<String>,
    pub pr_body: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StepInput {
    pub id: Option<String>,
    pub title: Option<String>,
    pub instructions: Option<String>,
    pub skill: Option<SkillSelection>,
}

/// A skill choice: `auto` lets the agent decide, anything else names a directory of
/// procedure files materialized under `.agents/skills/`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillSelection {
    pub id: String,
    #[serde(default)]
    pub args: Map<String, Value>,
    #[serde(default)]
    pub required_capabilities: Vec<String>,
}

pub const AUTO_SKILL: &str = "auto";

impl SkillSelection {
    pub fn auto() -> Self {
        Self::named(AUTO_SKILL)
    }

    pub fn named(id: impl Into<String>) -> Self {
        SkillSelection {
            id: id.into(),
            args: Map::new(),
            required_capabilities: Vec::new(),
        }
    }

    pub fn is_auto(&self) -> bool {
        self.id == AUTO_SKILL
    }
}

impl Default for SkillSelection {
    fn default() -> Self {
        Self::auto()
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GitSettings {
    pub starting_branch: Option<String>,
    pub new_branch: Option<String>,
}

/// Where the worker finds credentials: references (`env://NAME`, `file:///path`), never secrets.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthRefs {
    pub repo_auth_ref: Option<String>,
    pub publish_auth_ref: Option<String>,
}

/// Container execution settings. Only the fields the contract checks are typed; the
/// rest belongs to the container runner and is carried through untouched.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerSpec {
    pub enabled: bool,
    pub image: Option<String>,
    /// The argv to run in the image; `None` uses the image's own command.
    pub command: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
