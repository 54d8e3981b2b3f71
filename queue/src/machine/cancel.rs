//! Cancellation (seed 002): an operator's request, which ends a job that is not running at
//! once and marks a running one; the worker's acknowledgement once it has stopped; and who
//! acknowledged, read back for an idempotent repeat.

use chrono::{DateTime, Utc};
use contract::events::{
    CancelAcknowledged, CancelRequest, Cancelled, CancelledBy, WorkerCall, read_payload,
};
use contract::job::events;
use contract::{EventLevel, Job, JobState};
use serde_json::{Map, Value};

use super::{Outcome, PendingEvent, call, changed, check_fence, finish_cancelled};
use crate::error::QueueError;
use crate::lease::Fence;

/// queued → cancelled at once; running → only marked, the worker stops and acknowledges.
/// Repeats are no-ops; a job that finished otherwise cannot be cancelled any more.
pub(crate) fn request_cancel(
    job: &mut Job,
    user_id: Option<&str>,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    match job.status {
        JobState::Cancelled => Ok(Outcome::Unchanged),
        JobState::Running if job.cancel_requested_at.is_some() => Ok(Outcome::Unchanged),
        JobState::Queued | JobState::Running | JobState::Paused | JobState::AwaitingApproval => {
            job.cancel_requested_at = Some(now);
            job.cancel_requested_by_user_id = user_id.map(str::to_string);
            job.cancel_reason = reason;
            job.updated_at = now;
            let request = CancelRequest {
                requested_by: job.cancel_requested_by_user_id.clone(),
                reason: job.cancel_reason.clone(),
            };
            if job.status != JobState::Running {
                let message = match job.status {
                    JobState::Paused => "cancelled while paused",
                    JobState::AwaitingApproval => "cancelled while awaiting approval",
                    _ => "cancelled before any worker claimed it",
                };
                finish_cancelled(job, now);
                let cancelled = Cancelled {
                    cause: request,
                    by: CancelledBy::User,
                };
                Ok(changed(vec![PendingEvent::new(
                    events::JOB_CANCELLED,
                    EventLevel::Warn,
                    message.to_string(),
                    &cancelled,
                )]))
            } else {
                Ok(changed(vec![PendingEvent::new(
                    events::JOB_CANCEL_REQUESTED,
                    EventLevel::Warn,
                    "cancel requested; waiting for the worker to stop".to_string(),
                    &request,
                )]))
            }
        }
        JobState::Succeeded | JobState::Failed | JobState::DeadLetter => Err(QueueError::conflict(
            &job.id,
            job.status,
            "a finished job cannot be cancelled",
        )),
    }
}

/// running (cancel requested) → cancelled, by the worker holding the lease. `acked_by` is
/// the fence recorded by the `job.cancelled` event of an already-cancelled job: the same
/// worker and attempt acknowledging again gets a no-op, anyone else a refusal. A job that
/// a `complete` already finished after the cancel was requested stays succeeded (the work
/// is done), and an ack after it is a conflict (409).
pub(crate) fn ack_cancel(
    job: &mut Job,
    fence: &Fence,
    now: DateTime<Utc>,
    acked_by: Option<&Fence>,
) -> Result<Outcome, QueueError> {
    if job.status == JobState::Cancelled && acked_by == Some(fence) {
        return Ok(Outcome::Unchanged);
    }
    check_fence(job, fence)?;
    if job.cancel_requested_at.is_none() {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "no cancel was requested; complete or fail the job instead",
        ));
    }
    finish_cancelled(job, now);
    let cancelled = Cancelled {
        cause: CancelAcknowledged {
            call: call(fence),
            request: CancelRequest {
                requested_by: job.cancel_requested_by_user_id.clone(),
                reason: job.cancel_reason.clone(),
            },
        },
        by: CancelledBy::Worker,
    };
    Ok(changed(vec![PendingEvent::new(
        events::JOB_CANCELLED,
        EventLevel::Warn,
        "cancelled: the worker stopped and acknowledged".to_string(),
        &cancelled,
    )]))
}

/// The fence of the worker whose own call cancelled the job, read back from the
/// `job.cancelled` event; `None` if a user or the rescuer cancelled it.
pub(crate) fn acknowledged_by(payload: &Map<String, Value>) -> Option<Fence> {
    let cancelled: Cancelled<WorkerCall> = read_payload(payload)?;
    (cancelled.by == CancelledBy::Worker).then_some(Fence {
        worker_id: cancelled.cause.worker_id,
        attempt: cancelled.cause.attempt,
    })
}
