//! The canonical task: what [`normalize`](crate::normalize()) produces and what the queue
//! stores and the worker executes.
//!
//! Its JSON is the canonical envelope: every field present (unset ones as `null`),
//! `repository` never `repo`, steps always an array with ids filled in, and
//! `targetRuntime` equal to `task.runtime.mode`. Normalizing that JSON again yields the
//! same value, so the server can re-validate stored tasks without drift.
//!
//! `payload.requiredCapabilities` holds the *derived* list (see
//! [`derive_capabilities`](crate::derive_capabilities)), so to change a task's runtime or
//! publish mode, edit the original request rather than this value: a capability derived
//! from the old settings would otherwise be carried over as if the client had asked for it.

use serde::{Deserialize, Serialize};

use crate::modes::{PublishMode, RuntimeMode};
use crate::wire::{AuthRefs, ContainerSpec, GitSettings, JobType, SkillSelection};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NormalizedTask {
    #[serde(rename = "type")]
    pub job_type: JobType,
    pub priority: i32,
    pub max_attempts: u32,
    pub affinity_key: Option<String>,
    pub payload: Payload,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub repository: String,
    pub target_runtime: RuntimeMode,
    pub required_capabilities: Vec<String>,
    pub auth: AuthRefs,
    pub task: TaskSpec,
    /// What made the job when no person did (a GitHub issue's label or mention). Left
    /// out of the JSON when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::source::JobSource>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    pub instructions: String,
    pub skill: SkillSelection,
    pub runtime: RuntimeSettings,
    pub git: GitSettings,
    pub publish: PublishSettings,
    /// Empty means one implicit step (see [`NormalizedTask::resolved_steps`]).
    pub steps: Vec<Step>,
    pub container: ContainerSpec,
    /// When the task is done (seed 003). Left out of the JSON when absent, so the tasks
    /// stored before it existed read the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    /// Who hears of the task's end. Left out of the JSON when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Notify>,
    /// What the job may spend in all before it pauses and asks. Left out when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::JobBudget>,
    /// The follow-up rounds after the job's first, in order: set by the queue when an
    /// operator follows up on an ended job. Left out while there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
}

/// A follow-up round: its number (2 for the first follow-up) and the first of the steps it
/// added; the steps from there to the next round's are its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Round {
    pub round: u32,
    pub from_step: usize,
    /// What the pull request said that made it (`check_run:ID`, `review:ID`, or a
    /// comment that mentioned stepwise, `comment:ID`); each is taken by one round only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
}

/// The prefix of a round's cause that is a person's comment (`comment:ID`).
pub const MENTION_CAUSE: &str = "comment:";

impl TaskSpec {
    /// A round took `cause` (`check_run:ID`, `review:ID`) already.
    pub fn took(&self, cause: &str) -> bool {
        self.rounds
            .iter()
            .any(|r| r.causes.iter().any(|c| c == cause))
    }

    /// The rounds that took a pull request's feedback (a person's mention, `comment:ID`,
    /// is a cause too, but it is not feedback that counts against `maxRounds`).
    pub fn feedback_rounds(&self) -> u32 {
        self.rounds
            .iter()
            .filter(|r| r.causes.iter().any(|c| !c.starts_with(MENTION_CAUSE)))
            .count() as u32
    }

    /// The round the job is in: 1 until a follow-up.
    pub fn round(&self) -> u32 {
        self.rounds.last().map_or(1, |r| r.round)
    }

    /// The round step `index` belongs to.
    pub fn round_of(&self, index: usize) -> u32 {
        self.rounds
            .iter()
            .rev()
            .find(|r| index >= r.from_step)
            .map_or(1, |r| r.round)
    }
}

/// Who hears of a task's end, beside the server's own webhooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notify {
    /// Posted, signed, when the task ends or waits for approval.
    pub webhook_url: String,
}

/// What "done" means for a task (seed 003): its criteria in words, and the check that
/// decides it. With a `command`, the worker runs it in the workspace after the steps; while
/// it fails, the agent runs again with its output, up to `max_iterations` more times.
/// Without one, the criteria are shown and nothing checks them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub criteria: Option<String>,
    pub max_iterations: u32,
    /// Run with `bash -c` in the repository; passes on exit code 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A regular expression the check's output must also match to pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_pattern: Option<String>,
    /// How long one run of the check may take;
    /// [`DEFAULT_CHECK_TIMEOUT_SECONDS`](crate::limits::DEFAULT_CHECK_TIMEOUT_SECONDS) when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
}

impl Completion {
    /// The check's command, when the task has one to run.
    pub fn check(&self) -> Option<&str> {
        self.command.as_deref()
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(
            self.timeout_seconds
                .unwrap_or(crate::limits::DEFAULT_CHECK_TIMEOUT_SECONDS),
        ))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSettings {
    pub mode: RuntimeMode,
    /// `None` lets the runtime's CLI pick its own default model.
    pub model: Option<String>,
    /// Lowercase and valid for `mode`; `None` leaves it to the CLI.
    pub effort: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishSettings {
    pub mode: PublishMode,
    pub pr_base_branch: Option<String>,
    pub commit_message: Option<String>,
    pub pr_title: Option<String>,
    pub pr_body: Option<String>,
    /// `true` (`"approval": "required"`): the job stops after execute, awaiting an
    /// operator's approval before anything is published. Absent when not required, so a
    /// task without it normalizes as it always did.
    #[serde(
        default,
        rename = "approval",
        with = "approval_wire",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub approval_required: bool,
    /// What the server does with the pull request's checks and reviews; absent: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<crate::feedback::PrFeedback>,
}

/// `task.publish.approval` on the wire: `"required"`, or absent.
mod approval_wire {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(required: &bool, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if *required { "required" } else { "none" })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(Option::<String>::deserialize(d)?.as_deref() == Some("required"))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub id: String,
    pub title: Option<String>,
    pub instructions: Option<String>,
    /// `None` inherits the task's skill; `Some(auto)` deliberately does not.
    pub skill: Option<SkillSelection>,
}

impl NormalizedTask {
    /// The task a stored job carries. The queue stores the payload already normalized, so
    /// this only reads it back; an error says which part is not what the contract wrote.
    pub fn from_job(job: &crate::Job) -> Result<NormalizedTask, String> {
        let job_type = match job.job_type.as_str() {
            t if t == JobType::Task.as_str() => JobType::Task,
            other => return Err(format!("job type {other:?} is not a task")),
        };
        let payload = Deserialize::deserialize(&*job.payload)
            .map_err(|e| format!("the job's payload is not a normalized task: {e}"))?;
        Ok(NormalizedTask {
            job_type,
            priority: job.priority,
            max_attempts: job.max_attempts,
            affinity_key: job.affinity_key.clone(),
            payload,
        })
    }

    /// Non-auto skill ids of the task and its steps, first appearance first: what the
    /// prepare stage must materialize before any step runs.
    pub fn skills(&self) -> Vec<String> {
        let task = &self.payload.task;
        let step_skills = task.steps.iter().filter_map(|s| s.skill.as_ref());
        let mut ids: Vec<String> = Vec::new();
        for skill in std::iter::once(&task.skill).chain(step_skills) {
            if !skill.is_auto() && !ids.contains(&skill.id) {
                ids.push(skill.id.clone());
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Defaults, Job, normalize};

    fn stored(task: &NormalizedTask, job_type: &str) -> Job {
        serde_json::from_value(json!({
            "id": "0190a000-0000-7000-8000-000000000001", "type": job_type, "status": "running", "priority": task.priority,
            "payload": task.payload, "requiredCapabilities": [], "attempt": 1,
            "maxAttempts": task.max_attempts, "nextAttemptAt": "2026-01-01T00:00:00Z",
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn a_stored_job_reads_back_as_the_task_it_was_normalized_from() {
        let raw = json!({ "priority": 3, "payload": { "repository": "octo/hello",
            "task": { "instructions": "Add a README", "steps": "- [ ] one\n- [ ] two" } } });
        let task = normalize(&raw, &Defaults::default()).unwrap();
        assert_eq!(
            NormalizedTask::from_job(&stored(&task, "task")),
            Ok(task.clone())
        );
        let other = NormalizedTask::from_job(&stored(&task, "cron")).unwrap_err();
        assert!(other.contains("\"cron\""), "{other}");
        let mut broken = stored(&task, "task");
        broken.payload = json!({ "repository": 1 }).into();
        assert!(
            NormalizedTask::from_job(&broken)
                .unwrap_err()
                .contains("payload")
        );
    }
}
