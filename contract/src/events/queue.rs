//! The payloads of the queue's own events (`job.*`, see [`crate::job::events`]). A
//! transition's payload says what caused it and then what it led to, so most are a cause
//! ([`WorkerCall`], [`WorkerFailure`], [`LeaseHeld`], [`CancelRequest`]) wrapped in what
//! followed ([`Retried`], [`Cancelled`]); the keys are spelled here once.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::wire_names;

/// `job.created`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobCreated {
    pub priority: i32,
    pub max_attempts: u32,
    pub required_capabilities: Vec<String>,
    pub created_by_user_id: Option<String>,
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

/// Whose act cancelled a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CancelledBy {
    /// A user, before any worker claimed the job.
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
