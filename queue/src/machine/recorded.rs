//! The events of a job's creation, its claims and its success: built here once, for the
//! service, for the claims of both backends, and for the readers of a timeline whose
//! `job.claimed` and `job.completed` are kept in the job's row (migrations 0021, 0022).

use chrono::{DateTime, Utc};
use contract::EventLevel;
use contract::Job;
use contract::events::{JobCompleted, JobCreated, LeaseHeld, WorkerCall};
use contract::job::events;

use super::PendingEvent;

/// The `job.claimed` of a job as its claim left it: the worker, the attempt, and the lease
/// the claim gave (`lease_expires_at`, given apart because heartbeats move the row's: a
/// claim kept in the row is read back with the lease it kept).
pub(crate) fn claimed_event(job: &Job, lease_expires_at: Option<DateTime<Utc>>) -> PendingEvent {
    let worker = job.claimed_by.as_deref().unwrap_or("?");
    PendingEvent::new(
        events::JOB_CLAIMED,
        EventLevel::Info,
        format!(
            "claimed by {worker} (attempt {} of {})",
            job.attempt, job.max_attempts
        ),
        &LeaseHeld {
            worker_id: job.claimed_by.clone(),
            attempt: job.attempt,
            lease_expires_at,
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
