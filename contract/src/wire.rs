//! What a client sends to create a job: the types the web UI builds and serializes.
//!
//! Almost everything is optional here because the server fills the gaps from
//! [`Defaults`](crate::Defaults); [`normalize`](crate::normalize()) turns a request into
//! the fully resolved [`NormalizedTask`](crate::NormalizedTask). The leaf types at the
//! bottom are shared by both shapes. A request serializes only what its client chose: an
//! absent field, an empty list and a default are left out, where the canonical task
//! writes every field (the normalizer reads a `null` exactly like an absent field, so
//! either is accepted coming in). The task form's request is thus the task as typed,
//! and the server's defaults visibly apply to the rest.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::limits;
use crate::modes::{PublishMode, RuntimeMode};
use crate::wire_names;

/// The kind of queue job. Only tasks exist today; the field is kept so the envelope can
/// grow other job kinds without a breaking change.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobType {
    #[default]
    Task,
}

wire_names!(JobType, "job type", exact { Task = "task" });

/// The job-create request envelope.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobRequest {
    #[serde(rename = "type")]
    pub job_type: JobType,
    #[serde(skip_serializing_if = "is_default_priority")]
    pub priority: i32,
    #[serde(skip_serializing_if = "is_default_max_attempts")]
    pub max_attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity_key: Option<String>,
    /// The jobs this one waits for: it is queued, and no worker claims it before every
    /// one of them has succeeded; if one fails, is cancelled or dead-letters, it is
    /// cancelled, the reason naming that job.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    pub payload: PayloadInput,
}

fn is_default_priority(priority: &i32) -> bool {
    *priority == limits::DEFAULT_PRIORITY
}

fn is_default_max_attempts(attempts: &u32) -> bool {
    *attempts == limits::DEFAULT_MAX_ATTEMPTS
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// A leaf type the canonical task shares writes every field, `null` included (see
/// [`NormalizedTask`](crate::NormalizedTask)); inside a request it writes only the fields
/// that are set, as the rest of the request does.
fn set_fields_only<T: Serialize, S: Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let value = match serde_json::to_value(value).map_err(serde::ser::Error::custom)? {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .filter(|(_, field)| match field {
                    Value::Null => false,
                    Value::Array(items) => !items.is_empty(),
                    Value::Object(inner) => !inner.is_empty(),
                    _ => true,
                })
                .collect(),
        ),
        other => other,
    };
    value.serialize(serializer)
}

impl Default for JobRequest {
    fn default() -> Self {
        JobRequest {
            job_type: JobType::Task,
            priority: limits::DEFAULT_PRIORITY,
            max_attempts: limits::DEFAULT_MAX_ATTEMPTS,
            affinity_key: None,
            depends_on: Vec::new(),
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_runtime: Option<RuntimeMode>,
    /// Extra capabilities the client wants; the derived ones are added by normalization.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required_capabilities: Vec<String>,
    #[serde(skip_serializing_if = "is_default", serialize_with = "set_fields_only")]
    pub auth: AuthRefs,
    pub task: TaskInput,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskInput {
    /// The task objective; every step's prompt starts with it.
    pub instructions: String,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "set_fields_only"
    )]
    pub skill: Option<SkillSelection>,
    #[serde(skip_serializing_if = "is_default")]
    pub runtime: RuntimeInput,
    #[serde(skip_serializing_if = "is_default", serialize_with = "set_fields_only")]
    pub git: GitSettings,
    #[serde(skip_serializing_if = "is_default")]
    pub publish: PublishInput,
    // Sent even when empty, as the task form always has: no steps is one implicit step.
    pub steps: Vec<StepInput>,
    #[serde(skip_serializing_if = "is_default", serialize_with = "set_fields_only")]
    pub container: ContainerInput,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<CompletionInput>,
}

/// A task's completion criteria as a client sends them; see
/// [`Completion`](crate::model::Completion).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompletionInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub criteria: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RuntimeInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<RuntimeMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PublishInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<PublishMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_base_branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr_body: Option<String>,
    /// `required`: stop after execute, awaiting an operator's approval, before publishing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StepInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "set_fields_only"
    )]
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

pub use crate::container::{ContainerInput, ContainerSpec};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn full_request() -> JobRequest {
        let mut request = JobRequest {
            priority: 7,
            affinity_key: Some("repo-a".into()),
            ..JobRequest::default()
        };
        request.payload.repository = "octo/hello".into();
        request.payload.auth.repo_auth_ref = Some("env://GH_TOKEN".into());
        request.payload.task.instructions = "Do it".into();
        request.payload.task.git.new_branch = Some("feature/x".into());
        request.payload.task.runtime.mode = Some(RuntimeMode::Claude);
        request.payload.task.steps = vec![
            StepInput {
                skill: Some(SkillSelection::auto()),
                ..StepInput::default()
            },
            StepInput::default(),
        ];
        request
    }

    #[test]
    fn a_request_carries_only_what_its_client_set() {
        assert_eq!(
            serde_json::to_value(full_request()).unwrap(),
            json!({ "type": "task", "priority": 7, "affinityKey": "repo-a", "payload": {
                "repository": "octo/hello",
                "auth": { "repoAuthRef": "env://GH_TOKEN" },
                "task": {
                    "instructions": "Do it",
                    "runtime": { "mode": "claude" },
                    "git": { "newBranch": "feature/x" },
                    "steps": [{ "skill": { "id": "auto" } }, {}],
                },
            } })
        );
    }

    #[test]
    fn a_request_reads_back_as_it_was_sent() {
        let request = full_request();
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(serde_json::from_str::<JobRequest>(&json).unwrap(), request);
    }

    #[test]
    fn outside_a_request_the_shared_leaf_types_write_every_field() {
        assert_eq!(
            serde_json::to_value(GitSettings::default()).unwrap(),
            json!({ "startingBranch": null, "newBranch": null })
        );
        assert_eq!(
            serde_json::to_value(SkillSelection::auto()).unwrap(),
            json!({ "id": "auto", "args": {}, "requiredCapabilities": [] })
        );
    }
}
