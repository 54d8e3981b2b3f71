//! The events of a job's creation, its claims and its success: built here once, for the
//! service, for the claim statements of both backends, and for the readers of a timeline
//! whose `job.completed` is kept in the job's row (`completed_event_id`, migration 0021).

use std::fmt::Display;

use chrono::{DateTime, Utc};
use contract::EventLevel;
use contract::Job;
use contract::events::{JobCompleted, JobCreated, LeaseHeld, WorkerCall, payload_of};
use contract::job::events;
use serde_json::Value;

use super::PendingEvent;

pub(crate) fn claimed_event(job: &Job) -> PendingEvent {
    let worker = job.claimed_by.as_deref().unwrap_or("?");
    let (kind, level) = CLAIMED;
    PendingEvent::new(
        kind,
        level,
        claimed_message(worker, job.attempt, job.max_attempts),
        &LeaseHeld {
            worker_id: job.claimed_by.clone(),
            attempt: job.attempt,
            lease_expires_at: job.lease_expires_at,
        },
    )
}

/// The `job.completed` of a job as its completion left it: everything it says is in the
/// row, the worker and attempt whose fence the completion passed among it, so the event is
/// the same whether it was built as the job completed or read back from the row since.
pub(crate) fn completed_event(job: &Job) -> PendingEvent {
    let late_cancel = job.cancel_requested_at.is_some();
    let message = if late_cancel {
        "succeeded; the cancel request came too late to stop it"
    } else {
        "succeeded"
    };
    let completed = JobCompleted {
        call: WorkerCall {
            worker_id: job.claimed_by.clone().unwrap_or_default(),
            attempt: job.attempt,
        },
        cancel_requested: late_cancel,
        result_summary: job.result_summary.clone(),
        // Its presence is what makes the database start watching the pull request.
        feedback: job
            .payload
            .pointer("/task/publish/feedback")
            .and_then(|v| serde_json::from_value(v.clone()).ok()),
    };
    PendingEvent::new(
        events::JOB_COMPLETED,
        EventLevel::Info,
        message.to_string(),
        &completed,
    )
}

/// The kind and level of every `job.claimed` event, whichever way it is written.
const CLAIMED: (&str, EventLevel) = (events::JOB_CLAIMED, EventLevel::Info);

fn claimed_message(worker: &str, attempt: impl Display, max_attempts: impl Display) -> String {
    format!("claimed by {worker} (attempt {attempt} of {max_attempts})")
}

/// [`claimed_event`] for a statement that claims and records in one go (PostgreSQL's): it
/// learns each row's attempt only as it claims, so it gets the message and the payload as
/// `format()` templates, `%1$s` for the attempt and `%2$s` for the max attempts, made from
/// the same parts. The statement only fills them in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClaimedTemplate {
    pub kind: &'static str,
    pub level: EventLevel,
    pub message: String,
    /// JSON text once filled in.
    pub payload: String,
}

pub(crate) fn claimed_event_template(worker: &str, lease: DateTime<Utc>) -> ClaimedTemplate {
    // Stands for the attempt until the text is a template; a NUL is refused in worker ids,
    // so no other value serializes to it.
    const HOLE: &str = "\0attempt";
    let literal = |text: &str| text.replace('%', "%%");
    let payload = LeaseHeld {
        worker_id: Some(worker.to_string()),
        attempt: HOLE,
        lease_expires_at: Some(lease),
    };
    let payload = Value::Object(payload_of(&payload));
    let hole = Value::from(HOLE);
    ClaimedTemplate {
        kind: CLAIMED.0,
        level: CLAIMED.1,
        message: claimed_message(&literal(worker), "%1$s", "%2$s"),
        payload: literal(&payload.to_string()).replace(&hole.to_string(), "%1$s"),
    }
}

pub(crate) fn created_event(job: &Job) -> PendingEvent {
    // A start scheduled ahead of the job's creation, as `create_job` set it; a job that
    // waits for others starts when they have succeeded, not at a time.
    let scheduled = (job.next_attempt_at > job.created_at && job.waiting_for.is_empty())
        .then_some(job.next_attempt_at);
    PendingEvent::new(
        events::JOB_CREATED,
        EventLevel::Info,
        match (scheduled, job.waiting_for.len()) {
            (_, 1) => format!("queued, waiting for job {}", job.waiting_for[0]),
            (_, n) if n > 1 => format!("queued, waiting for {n} jobs"),
            (Some(at), _) => format!(
                "queued, to start at {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            (None, _) => "queued".to_string(),
        },
        &JobCreated {
            priority: job.priority,
            max_attempts: job.max_attempts,
            required_capabilities: job.required_capabilities.clone(),
            created_by_user_id: job.created_by_user_id.clone(),
            not_before: scheduled,
            source: job
                .payload
                .get("source")
                .and_then(|s| serde_json::from_value(s.clone()).ok()),
            waiting_for: job.waiting_for.clone(),
        },
    )
}
