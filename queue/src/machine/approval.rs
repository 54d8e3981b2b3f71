//! The approval gate before publish (`task.publish.approval: required`): the worker stops
//! after execute and asks; an operator approves (the job goes back to the queue to publish
//! only) or rejects (it fails, nothing published). Nothing is held while it waits.

use chrono::{DateTime, Utc};
use contract::events::CheckpointSaved;
use contract::job::events;
use contract::{Approval, EventLevel, Job, JobState};
use serde_json::json;

use super::{Outcome, PendingEvent, ack_cancel, changed, check_fence};
use crate::error::QueueError;
use crate::lease::Fence;

/// running → awaiting_approval, by the worker holding the lease once its steps are done;
/// `checkpoint` holds the work to publish. A cancel requested meanwhile wins. The same
/// attempt asking again gets a no-op; a job already approved is not asked again.
pub(crate) fn request_approval(
    job: &mut Job,
    fence: &Fence,
    now: DateTime<Utc>,
    checkpoint: Option<CheckpointSaved>,
) -> Result<Outcome, QueueError> {
    if job.status == JobState::AwaitingApproval && job.attempt == fence.attempt {
        return Ok(Outcome::Unchanged);
    }
    check_fence(job, fence)?;
    if job.cancel_requested_at.is_some() {
        job.pause_requested = None;
        return ack_cancel(job, fence, now, None);
    }
    if job.approval.as_ref().is_some_and(Approval::is_approved) {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job is approved already; publish it",
        ));
    }
    job.status = JobState::AwaitingApproval;
    job.claimed_by = None;
    job.lease_expires_at = None;
    job.pause_requested = None;
    if checkpoint.is_some() {
        job.resume_from = checkpoint;
    }
    job.approval = Some(Approval {
        requested_at: now,
        approved_by: None,
        approved_at: None,
    });
    job.updated_at = now;
    let payload = json!({
        "workerId": fence.worker_id,
        "attempt": fence.attempt,
        "resumeFrom": job.resume_from,
    });
    Ok(changed(vec![PendingEvent::new(
        events::JOB_APPROVAL_REQUESTED,
        EventLevel::Warn,
        "awaiting approval: the steps are done; review the changes, then approve or reject"
            .to_string(),
        &payload,
    )]))
}

/// awaiting_approval → queued, to publish the kept work without running a step again.
/// A repeat is a no-op.
pub(crate) fn approve(
    job: &mut Job,
    user_id: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    let approved = job.approval.as_ref().is_some_and(Approval::is_approved);
    match job.status {
        JobState::Queued | JobState::Running | JobState::Succeeded if approved => {
            Ok(Outcome::Unchanged)
        }
        JobState::AwaitingApproval => {
            let approval = job.approval.get_or_insert(Approval {
                requested_at: now,
                approved_by: None,
                approved_at: None,
            });
            approval.approved_by = user_id.map(str::to_string);
            approval.approved_at = Some(now);
            job.status = JobState::Queued;
            job.next_attempt_at = now;
            job.updated_at = now;
            let payload = json!({ "approvedBy": user_id, "resumeFrom": job.resume_from });
            Ok(Outcome::Changed {
                events: vec![PendingEvent::new(
                    events::JOB_APPROVED,
                    EventLevel::Info,
                    "approved: queued to publish".to_string(),
                    &payload,
                )],
                available: true,
            })
        }
        _ => Err(QueueError::conflict(
            &job.id,
            job.status,
            "only a job awaiting approval can be approved",
        )),
    }
}

/// awaiting_approval → failed with the operator's `reason`; nothing is published. A
/// rejected job can be retried from a step, which asks for approval again.
pub(crate) fn reject(
    job: &mut Job,
    user_id: Option<&str>,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    if job.status != JobState::AwaitingApproval {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "only a job awaiting approval can be rejected",
        ));
    }
    let by = user_id.unwrap_or("an operator");
    let message = match &reason {
        Some(reason) => format!("rejected by {by}: {reason}"),
        None => format!("rejected by {by}"),
    };
    job.status = JobState::Failed;
    job.error_message = Some(message.clone());
    job.finished_at = Some(now);
    job.updated_at = now;
    let payload = json!({ "rejectedBy": user_id, "reason": reason });
    Ok(changed(vec![PendingEvent::new(
        events::JOB_REJECTED,
        EventLevel::Error,
        message,
        &payload,
    )]))
}
