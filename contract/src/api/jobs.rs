//! The bodies of the routes people use (`/api/queue/jobs…`): the pages of jobs, events and
//! artifacts the server answers and the worker's client reads, and the requests that
//! cancel, pause, resume and retry a job.
//! As in `worker`, doc comments here are the OpenAPI document's descriptions.

use serde::{Deserialize, Serialize};

use crate::JobId;
use crate::job::{Artifact, Job, JobEvent};

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobList {
    pub items: Vec<Job>,
    pub next_cursor: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelBody {
    pub reason: Option<String>,
}

/// `POST /api/queue/jobs/{id}/pause`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PauseBody {
    /// Stop the running step now and lose its work since the last checkpoint, rather than
    /// let it finish and pause at the next step or iteration boundary (the default).
    #[serde(default)]
    pub immediate: bool,
}

/// `POST /api/queue/jobs/{id}/resume`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeBody {
    /// The id of the checkpoint to resume from (`step-2`, `iteration-1`, as
    /// `GET …/checkpoints` lists them); the one the job paused at when absent.
    pub checkpoint: Option<String>,
}

/// `POST /api/queue/jobs/{id}/steps`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppendStepsBody {
    /// The steps to add after the job's own: an array of step objects (as at submit) or
    /// a markdown checklist string.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub steps: serde_json::Value,
}

/// `POST /api/queue/jobs/{id}/follow-up`: the next round's steps, or one step's
/// instructions (exactly one of the two).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FollowUpBody {
    /// The steps the round runs: an array of step objects (as at submit) or a markdown
    /// checklist string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub steps: Option<serde_json::Value>,
    /// One step's instructions, for a round of one step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// `POST /api/queue/jobs/{id}/reject`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RejectBody {
    /// Why; it becomes the job's error.
    pub reason: Option<String>,
}

/// `POST /api/queue/jobs/{id}/retry`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryBody {
    /// The step to run again first, by its 0-based `stepIndex`; the work of the steps
    /// before it is restored from the checkpoint after the one before. Absent: the first
    /// step that did not succeed (the failed one), or the completion loop and publish
    /// when every step did.
    pub from_step_index: Option<usize>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventList {
    pub items: Vec<JobEvent>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactList {
    pub items: Vec<Artifact>,
}

/// `GET /jobs/{id}/checkpoints`: the checkpoints saved so far, oldest first.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointList {
    pub items: Vec<crate::timeline::Checkpoint>,
}

/// One message of `GET /jobs/stream`: which job changed, and how.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobChange {
    pub job_id: JobId,
    pub what: JobChangeKind,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobChangeKind {
    /// Its row: state, lease, cancel request.
    Changed,
    /// Its steps (planned, started, ended).
    Progress,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_cancel_without_a_reason_sends_null_as_the_client_did_by_hand() {
        let body = CancelBody { reason: None };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            json!({ "reason": null }).to_string()
        );
        assert!(serde_json::from_value::<CancelBody>(json!({ "why": "x" })).is_err());
    }

    #[test]
    fn a_job_page_reads_without_a_next_cursor() {
        let page: JobList = serde_json::from_value(json!({ "items": [] })).unwrap();
        assert_eq!(page.next_cursor, None);
        assert_eq!(
            serde_json::to_value(&page).unwrap(),
            json!({ "items": [], "nextCursor": null })
        );
    }
}

/// The answer to a GitHub webhook delivery (`POST /api/integrations/github`): the event it
/// was, how many watched pull requests look again now because of it, and what the
/// server's rules made of it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitHubDelivered {
    pub event: String,
    pub nudged: u64,
    #[serde(default)]
    pub outcome: DeliveryOutcome,
    /// The job it queued or followed up on, or the one a repeat of it had queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobId>,
    /// Why it made no job, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a delivery made of the rules (`--github-rules`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// No rule is about it (another event, repository, label; an edited comment).
    #[default]
    Ignored,
    /// A rule made a job of it.
    Queued,
    /// A mention on a job's own pull request: the job's next round.
    FollowedUp,
    /// The same delivery came before: its job is the one it made then.
    Repeat,
    /// A rule is about it, but its author may not ask (not a collaborator, not listed).
    Refused,
}
