//! The payloads of the queue's own events (`job.*`, see [`crate::job::events`]). A
//! transition's payload says what caused it and then what it led to, so most are a cause
//! ([`WorkerCall`], [`WorkerFailure`], [`LeaseHeld`], [`CancelRequest`]) wrapped in what
//! followed ([`Retried`], [`Cancelled`]); the keys are spelled here once.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::checkpoint::CheckpointSaved;
use crate::wire_names;

/// `job.created`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobCreated {
    pub priority: i32,
    pub max_attempts: u32,
    pub required_capabilities: Vec<String>,
    pub created_by_user_id: Option<String>,
    /// The scheduled start, when the request gave one in the future.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
    /// What made the job when no person did (`payload.source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::source::JobSource>,
    /// The jobs it waits for (`dependsOn`) that had not succeeded when it was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<crate::JobId>,
}

/// Who held the job and until when: `job.claimed`, and `job.lease_expired` with what
/// followed it. Generic over the attempt so that a claim statement, which learns the
/// attempt only as it claims, can be handed the payload with a stand-in for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseHeld<A = u32> {
    pub worker_id: Option<String>,
    pub attempt: A,
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// The worker call a transition answers: who made it, on which attempt (its fence).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerCall {
    pub worker_id: String,
    pub attempt: u32,
}

/// `job.completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobCompleted {
    #[serde(flatten)]
    pub call: WorkerCall,
    /// A cancel was requested, too late to stop the job.
    pub cancel_requested: bool,
    pub result_summary: Option<String>,
    /// The task's `publish.feedback`: the server watches the pull request next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<crate::feedback::PrFeedback>,
}

/// A worker reported the job failed: `job.failed`, `job.dead_lettered`, and what a
/// retry or a pending cancel made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerFailure {
    #[serde(flatten)]
    pub call: WorkerCall,
    pub error: String,
    pub retryable: bool,
}

/// `job.cancel_requested`: who asked, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequest {
    pub requested_by: Option<String>,
    pub reason: Option<String>,
}

/// The worker's acknowledgement of a cancel request: its call, and the request it obeyed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelAcknowledged {
    #[serde(flatten)]
    pub call: WorkerCall,
    #[serde(flatten)]
    pub request: CancelRequest,
}

/// A cause, with the reason of the cancel it ended in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WithReason<C> {
    #[serde(flatten)]
    pub cause: C,
    pub reason: Option<String>,
}

/// `job.retry_scheduled`: what failed, and when the job runs again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retried<C> {
    #[serde(flatten)]
    pub cause: C,
    pub next_attempt_at: DateTime<Utc>,
    pub delay_ms: i64,
}

/// `job.cancelled`: what ended it (a [`CancelRequest`] for a queued job, a
/// [`CancelAcknowledged`], or a failure or an expired lease [`WithReason`]), and by whom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancelled<C> {
    #[serde(flatten)]
    pub cause: C,
    pub by: CancelledBy,
}

/// Whose act cancelled a job, or paused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CancelledBy {
    /// A user, before any worker claimed the job (or while it was paused).
    User,
    /// The worker holding it: it stopped, or failed after the request.
    Worker,
    /// The lease rescuer: the lease ran out after the request.
    Rescuer,
}

wire_names!(CancelledBy, "canceller", exact {
    User = "user",
    Worker = "worker",
    Rescuer = "rescuer",
});

pub use crate::checkpoint::{PauseReason, PauseRequest};

/// `job.paused`: who stopped it (the worker, or a user before any worker claimed it, or
/// the rescuer when the lease ran out after the request), the worker's call when it was
/// the worker's, and the checkpoint its resume restores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Paused {
    pub by: CancelledBy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    pub resume_from: Option<CheckpointSaved>,
}

/// `job.resumed` and `job.retry_requested`: an operator put the job back in the queue,
/// to start at step `fromStepIndex` from checkpoint `resumeFrom` (`null`: from the start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requeued {
    pub requested_by: Option<String>,
    pub from_step_index: usize,
    pub resume_from: Option<CheckpointSaved>,
}

/// The payload of `job.notification_delivered` and `job.notification_failed`: what became
/// of one try to post a job's end (or its wait for approval) to a webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationOutcome {
    /// The webhook by its scheme and host only (`https://hooks.slack.com/…`): its path may
    /// be its secret.
    pub webhook: String,
    /// `job.ended` or `job.awaiting_approval`.
    pub event: String,
    /// 1 for the first try; 0 when nothing was tried (no key to sign with, task webhooks off).
    pub attempt: u32,
    /// The same on every try of one delivery, as the `Stepwise-Delivery` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
    /// The receiver's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why the try failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether another try follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrying: Option<bool>,
}

/// `job.history_deleted`: what retention deleted of a job that had been finished long
/// enough. The job row stays; this event is then its only one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryDeleted {
    /// When the job finished, as it stood when its history was deleted.
    pub finished_at: DateTime<Utc>,
    /// How many events were deleted.
    pub events: u64,
    /// How many artifacts were deleted.
    pub artifacts: u64,
}

/// `job.budget_exceeded`: the limit the job's usage reached, and the budget it reached it
/// in. The job pauses at the next boundary (at once for `maxMinutes`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetExceeded {
    #[serde(flatten)]
    pub overrun: crate::budget::Overrun,
    pub budget: crate::budget::JobBudget,
}

/// `job.needs_attention`: the pull request's feedback that no round of the job's own will
/// take, and why.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NeedsAttention {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<String>,
    /// The feedback rounds the job ran.
    pub rounds: u32,
    /// What is waiting: the checks that failed and the reviews that ask for changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
}

/// `job.budget_changed`: an operator set the job's budget; `was` is the one before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetChanged {
    pub requested_by: Option<String>,
    pub budget: crate::budget::JobBudget,
    pub was: Option<crate::budget::JobBudget>,
}
