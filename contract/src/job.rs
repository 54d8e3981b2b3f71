//! The wire types of a queued job, its events and its artifacts: what the server returns,
//! what the UI renders and what the worker reads back after claiming or heartbeating.
//!
//! Timestamps are `chrono::DateTime<Utc>` and travel as RFC 3339 strings in UTC
//! (`2026-02-17T10:00:00.123Z`); the queue keeps millisecond precision on both backends.
//! Ids of jobs and artifacts are UUIDv7 strings (time-ordered); event ids are integers that
//! only grow, so a client can resume an event stream after the last id it saw.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::JobId;
use crate::checkpoint::{CheckpointSaved, PauseReason, PauseRequest};
pub use crate::usage::StepUsage;
use crate::wire::JobType;
use crate::wire_names;

/// Where a job is in its life. Closed: a new state is a breaking change for every client.
///
/// Each variant says which named queue operation moves a job into that state (In) and
/// which moves it out again (Out).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for a worker.
    ///
    /// In: `create_job`; `fail` with a retryable error while attempts remain (after the
    /// backoff in `nextAttemptAt`); the lease rescuer when a worker stopped heartbeating
    /// and attempts remain; `resume` of a paused job; `retry_from_step` of a failed,
    /// cancelled or dead-lettered one. Out: `claim` (→ running), `request_cancel`
    /// (→ cancelled) or `request_pause` (→ paused).
    Queued,
    /// Leased to one worker (`claimedBy`, `attempt`) until `leaseExpiresAt`.
    ///
    /// In: `claim`. Out: `complete` (→ succeeded), `fail` (→ queued, failed, dead_letter
    /// or cancelled), `ack_cancel` (→ cancelled), `ack_pause` (→ paused, or cancelled
    /// when a cancel came too), the lease rescuer (→ queued, paused, cancelled or
    /// dead_letter). `request_cancel` and `request_pause` only mark it
    /// (`cancelRequestedAt`, `pauseRequested`); it stays running until the worker
    /// acknowledges.
    Running,
    /// Stopped on a user's request, its work kept as a checkpoint (`resumeFrom`); holds
    /// no lease and no workspace, and is never claimed, rescued or retried. Not terminal.
    ///
    /// In: `request_pause` on a queued job; `ack_pause` by the worker holding it, at a
    /// step or iteration boundary or after stopping the running step; the lease rescuer
    /// when the lease ran out after a pause was requested. Out: `resume` (→ queued) or
    /// `request_cancel` (→ cancelled).
    Paused,
    /// The steps are done and the task asks for an operator's approval before anything is
    /// published (`task.publish.approval: required`): the work is kept as a checkpoint
    /// (`resumeFrom`, its diff in `patches/changes.patch`); no lease, no workspace. Not terminal.
    ///
    /// In: `request_approval` by the worker holding the job, after execute. Out: `approve`
    /// (→ queued, to publish only), `reject` (→ failed) or `request_cancel` (→ cancelled).
    AwaitingApproval,
    /// The worker finished the work. Terminal.
    ///
    /// In: `complete`, even when a cancel was requested too late to stop the work: the
    /// work is done, so the job says so (its `job.completed` event carries
    /// `cancelRequested: true`). The worker's `ack_cancel` after that, like any further
    /// cancel request, answers a state conflict (409).
    Succeeded,
    /// The worker reported an error that retrying would not fix. Final unless an operator
    /// retries it from a step (`retry_from_step`, → queued), as cancelled and dead_letter.
    ///
    /// In: `fail` with `retryable = false`.
    Failed,
    /// Stopped on a user's request; never resurrected by a retry or a lease expiry. Terminal.
    ///
    /// In: `request_cancel` on a queued job; `ack_cancel` by the owning worker; `fail` or
    /// the lease rescuer on a running job whose cancel was requested.
    Cancelled,
    /// Every attempt failed with a retryable error or an expired lease. Terminal; an
    /// operator resubmits it as a new job.
    ///
    /// In: `fail` (retryable) or the lease rescuer on the job's last attempt.
    DeadLetter,
}

wire_names!(JobState, "job state", exact {
    Queued = "queued",
    Running = "running",
    Paused = "paused",
    AwaitingApproval = "awaiting_approval",
    Succeeded = "succeeded",
    Failed = "failed",
    Cancelled = "cancelled",
    DeadLetter = "dead_letter",
});

impl JobState {
    /// The job has ended: no worker will run it again unless an operator retries it.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            JobState::Queued | JobState::Running | JobState::Paused
        )
    }

    /// It is over: terminal, and not waiting at the gate before publish, where an
    /// operator's approval still sends it on.
    pub fn has_ended(self) -> bool {
        self.is_terminal() && self != JobState::AwaitingApproval
    }

    /// An operator may retry it from a step: it ended without succeeding.
    pub fn is_retryable_by_operator(self) -> bool {
        matches!(
            self,
            JobState::Failed | JobState::Cancelled | JobState::DeadLetter
        )
    }
}

/// One queued unit of work: a normalized task plus its lease, retry and cancel bookkeeping.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: JobId,
    /// The envelope's `type` (`task` today; see [`JobType`](crate::JobType)).
    #[serde(rename = "type")]
    pub job_type: String,
    pub status: JobState,
    pub priority: i32,
    /// The normalized task payload ([`Payload`](crate::Payload) as JSON). Shared: a job
    /// is copied at every transition (the row as read, the row as written, the queue's
    /// memory of it), and its task is the one large part that none of them changes.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub payload: Arc<Value>,
    pub affinity_key: Option<String>,
    /// What a worker must offer to claim the job (derived by normalization).
    pub required_capabilities: Vec<String>,
    pub created_by_user_id: Option<String>,
    /// How many times the job has been claimed; a worker's writes carry it as a fence.
    pub attempt: u32,
    pub max_attempts: u32,
    /// A queued job is not claimed before this instant (retry backoff).
    pub next_attempt_at: DateTime<Utc>,
    /// The worker holding the lease while running; kept on succeeded, failed and
    /// dead_letter as a record of who ran it; cleared when requeued or cancelled.
    pub claimed_by: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub cancel_requested_at: Option<DateTime<Utc>>,
    pub cancel_requested_by_user_id: Option<String>,
    pub cancel_reason: Option<String>,
    pub result_summary: Option<String>,
    /// The last error a worker reported, or why the queue gave up on the job.
    pub error_message: Option<String>,
    /// The first claim; not reset by retries.
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// What the job's steps used in all, over every attempt: the sum of the `usage` of
    /// its `task.step.finished` and `task.step.failed` events. A figure no step reported
    /// is absent; `null` while no step reported any.
    #[serde(default)]
    pub usage: Option<StepUsage>,
    /// A pause asked of the running job: its worker stops at the next step or iteration
    /// boundary, or at once when `immediate`, and the job becomes `paused`. A paused job
    /// keeps the request it obeyed.
    #[serde(default)]
    pub pause_requested: Option<PauseRequest>,
    /// Why a paused job paused: `operator` or `budget` (then its budget must be raised
    /// before it resumes). Absent unless paused; read from `pauseRequested`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<PauseReason>,
    /// Which round the job is in: 1, then 2 and on after each follow-up on it once it had
    /// ended (`POST …/follow-up`). Read from its task's `rounds`.
    #[serde(default = "first_round")]
    pub round: u32,
    /// Where the job's next attempt starts: the checkpoint its prepare stage restores, the
    /// steps and iterations before it not run again. `null`: from the start.
    #[serde(default)]
    pub resume_from: Option<CheckpointSaved>,
    /// The gate before publish, once the job reached it: when it was asked for, and who
    /// approved it. An approved job's next attempt only publishes.
    #[serde(default)]
    pub approval: Option<Approval>,
    /// The jobs it waits for (`dependsOn`) that have not succeeded yet: no worker claims
    /// it before they all have. Absent when it waits for none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<JobId>,
}

fn first_round() -> u32 {
    1
}

/// A job's approval gate (`task.publish.approval: required`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub requested_at: DateTime<Utc>,
    #[serde(default)]
    pub approved_by: Option<String>,
    #[serde(default)]
    pub approved_at: Option<DateTime<Utc>>,
}

impl Approval {
    pub fn is_approved(&self) -> bool {
        self.approved_at.is_some()
    }
}

impl Job {
    /// A task just queued: no attempt yet, no lease, nothing reported, created `now`, with
    /// the contract's default priority and attempts. Set what a caller knows with struct
    /// update syntax (`Job { priority, ..Job::queued(id, payload, now) }`).
    pub fn queued(id: JobId, payload: Value, now: DateTime<Utc>) -> Job {
        Job {
            id,
            job_type: JobType::Task.as_str().to_string(),
            status: JobState::Queued,
            priority: crate::limits::DEFAULT_PRIORITY,
            payload: Arc::new(payload),
            affinity_key: None,
            required_capabilities: Vec::new(),
            created_by_user_id: None,
            attempt: 0,
            max_attempts: crate::limits::DEFAULT_MAX_ATTEMPTS,
            next_attempt_at: now,
            claimed_by: None,
            lease_expires_at: None,
            cancel_requested_at: None,
            cancel_requested_by_user_id: None,
            cancel_reason: None,
            result_summary: None,
            error_message: None,
            started_at: None,
            finished_at: None,
            created_at: now,
            updated_at: now,
            usage: None,
            pause_requested: None,
            pause_reason: None,
            round: 1,
            resume_from: None,
            approval: None,
            waiting_for: Vec::new(),
        }
    }

    /// The job with the fields read from others set (see [`Job::derive`]).
    pub fn with_derived(mut self) -> Job {
        self.derive();
        self
    }

    /// Sets the fields read from others: `pauseReason` from the state and the request a
    /// paused job obeyed, `round` from the task's rounds.
    pub fn derive(&mut self) {
        self.pause_reason = (self.status == JobState::Paused).then(|| {
            self.pause_requested
                .as_ref()
                .map_or(PauseReason::Operator, |p| p.reason)
        });
        self.round = self
            .payload
            .get("task")
            .and_then(|t| t.get("rounds"))
            .and_then(|r| r.as_array())
            .and_then(|r| r.last())
            .and_then(|r| r.get("round"))
            .and_then(serde_json::Value::as_u64)
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(1);
    }

    /// The job's budget (`task.budget`), when its task sets one.
    pub fn budget(&self) -> Option<crate::budget::JobBudget> {
        Deserialize::deserialize(self.payload.get("task")?.get("budget")?).ok()
    }

    /// The limit of its budget its usage has reached, if any.
    pub fn budget_overrun(&self) -> Option<crate::budget::Overrun> {
        self.budget()?.overrun(&self.usage.unwrap_or_default())
    }

    /// A running job whose cancel was requested: the worker should stop and acknowledge.
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested_at.is_some()
    }
}

/// How loud an event is; the UI colours by it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventLevel {
    #[default]
    Info,
    Warn,
    Error,
}

wire_names!(EventLevel, "event level", exact {
    Info = "info",
    Warn = "warn",
    Error = "error",
});

/// One line of a job's timeline: the queue's own transitions (`job.*`, see [`events`])
/// and whatever the worker reports (`task.step.started`, ...).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobEvent {
    /// Global and increasing in commit order: the cursor of an event stream.
    pub id: i64,
    pub job_id: JobId,
    pub kind: String,
    pub level: EventLevel,
    pub message: String,
    pub payload: Map<String, Value>,
    pub created_at: DateTime<Utc>,
}

/// An event a worker appends to the job it holds.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewEvent {
    pub kind: String,
    #[serde(default)]
    pub level: EventLevel,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub payload: Map<String, Value>,
}

/// A file a worker stored for a job (a step log, a patch, `task_context.json`, ...).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub id: String,
    pub job_id: JobId,
    /// A relative path such as `logs/steps/step-0001.log`.
    pub name: String,
    /// Bytes.
    pub size: u64,
    pub content_type: String,
    /// Lowercase hex SHA-256 of the content.
    pub sha256: String,
    /// When this content was stored; a re-upload under the same name replaces it.
    pub created_at: DateTime<Utc>,
}

pub mod events;
mod published;
pub mod task;

pub use published::PublishResult;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_artifact_paths_follow_the_seed() {
        assert_eq!(task::stage_log(task::STAGE_PREPARE), "logs/prepare.log");
        assert_eq!(task::stage_log(task::STAGE_PUBLISH), "logs/publish.log");
        assert_eq!(task::step_log(0), "logs/steps/step-0000.log");
        assert_eq!(task::step_patch(12), "patches/steps/step-0012.patch");
    }

    #[test]
    fn job_states_round_trip_through_their_wire_names() {
        for state in JobState::ALL {
            let json = serde_json::to_value(state).unwrap();
            assert_eq!(json, Value::String(state.as_str().to_string()));
            assert_eq!(state.as_str().parse::<JobState>().unwrap(), state);
            assert_eq!(serde_json::from_value::<JobState>(json).unwrap(), state);
        }
        assert_eq!(JobState::DeadLetter.as_str(), "dead_letter");
        assert!("dead-letter".parse::<JobState>().is_err());
    }

    #[test]
    fn only_queued_running_and_paused_are_not_terminal() {
        let open: Vec<_> = JobState::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .collect();
        assert_eq!(
            open,
            [JobState::Queued, JobState::Running, JobState::Paused]
        );
    }

    #[test]
    fn job_serializes_with_exactly_the_wire_fields() {
        let at = DateTime::from_timestamp_millis(1_771_322_400_123).unwrap();
        let job = Job {
            id: "0190a000-0000-7000-8000-000000000000".parse().unwrap(),
            job_type: "task".into(),
            status: JobState::Running,
            priority: 5,
            payload: serde_json::json!({"repository": "o/r"}).into(),
            affinity_key: None,
            required_capabilities: vec!["codex".into(), "git".into()],
            created_by_user_id: Some("u1".into()),
            attempt: 1,
            max_attempts: 3,
            next_attempt_at: at,
            claimed_by: Some("w1".into()),
            lease_expires_at: Some(at),
            cancel_requested_at: None,
            cancel_requested_by_user_id: None,
            cancel_reason: None,
            result_summary: None,
            error_message: None,
            started_at: Some(at),
            finished_at: None,
            created_at: at,
            updated_at: at,
            usage: Some(StepUsage {
                output_tokens: Some(7),
                ..StepUsage::default()
            }),
            pause_requested: None,
            pause_reason: None,
            round: 1,
            resume_from: None,
            approval: None,
            waiting_for: Vec::new(),
        };
        let value = serde_json::to_value(&job).unwrap();
        let mut keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        let mut expected = vec![
            "id",
            "type",
            "status",
            "priority",
            "payload",
            "affinityKey",
            "requiredCapabilities",
            "createdByUserId",
            "attempt",
            "maxAttempts",
            "nextAttemptAt",
            "claimedBy",
            "leaseExpiresAt",
            "cancelRequestedAt",
            "cancelRequestedByUserId",
            "pauseRequested",
            "round",
            "resumeFrom",
            "approval",
            "cancelReason",
            "resultSummary",
            "errorMessage",
            "startedAt",
            "finishedAt",
            "createdAt",
            "updatedAt",
            "usage",
        ];
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(value["status"], "running");
        assert_eq!(value["createdAt"], "2026-02-17T10:00:00.123Z");
        assert_eq!(value["usage"], serde_json::json!({ "outputTokens": 7 }));
        let back: Job = serde_json::from_value(value).unwrap();
        assert_eq!(back, job);
    }

    #[test]
    fn new_event_defaults_to_info_with_an_empty_payload() {
        let event: NewEvent =
            serde_json::from_value(serde_json::json!({"kind": "task.step.started"})).unwrap();
        assert_eq!(event.level, EventLevel::Info);
        assert!(event.payload.is_empty());
        assert!("fatal".parse::<EventLevel>().is_err());
    }
}
