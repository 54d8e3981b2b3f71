//! The operator's transitions: pause (requested of a running job, acknowledged by its
//! worker, or at once on a queued one), resume a paused job, and retry one that ended from
//! a step. A paused job holds no lease, so the claim and the rescuer never see it.

use chrono::{DateTime, Utc};
use contract::events::{CancelledBy, CheckpointSaved, PauseReason, PauseRequest, Paused, Requeued};
use contract::job::events;
use contract::{EventLevel, Job, JobState};

use super::budget::budget_spent;
use super::{Outcome, PendingEvent, ack_cancel, changed, check_fence};
use crate::error::QueueError;
use crate::lease::Fence;

/// running or queued → paused: no lease, no owner, and `resume_from` the checkpoint the
/// resume restores (`None` keeps the one this attempt started from). The `job.paused`
/// event, with a message the caller may replace.
pub(super) fn pause_now(
    job: &mut Job,
    by: CancelledBy,
    fence: Option<&Fence>,
    checkpoint: Option<CheckpointSaved>,
) -> PendingEvent {
    job.status = JobState::Paused;
    job.claimed_by = None;
    job.lease_expires_at = None;
    // `pause_requested` is kept: the request a paused job obeyed says why it paused.
    job.derive();
    if checkpoint.is_some() {
        job.resume_from = checkpoint;
    }
    let paused = Paused {
        by,
        worker_id: fence.map(|f| f.worker_id.clone()),
        attempt: fence.map(|f| f.attempt),
        resume_from: job.resume_from.clone(),
    };
    let at = match &job.resume_from {
        Some(saved) => format!("paused; resumes {}", saved.label()),
        None => "paused; resumes from the start".to_string(),
    };
    PendingEvent::new(events::JOB_PAUSED, EventLevel::Warn, at, &paused)
}

impl PendingEvent {
    pub(super) fn with_message(mut self, message: String) -> Self {
        self.message = message;
        self
    }
}

/// running → pause requested (the worker stops at the next boundary, or at once when
/// `immediate`, and acknowledges); queued → paused at once. A repeat changes nothing,
/// except that an `immediate` request hastens one that was not. A job being cancelled, or
/// that has ended, cannot be paused.
pub(crate) fn request_pause(
    job: &mut Job,
    user_id: Option<&str>,
    immediate: bool,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    match job.status {
        JobState::Paused => Ok(Outcome::Unchanged),
        _ if job.cancel_requested_at.is_some() => Err(QueueError::conflict(
            &job.id,
            job.status,
            "a cancel was requested; the job is stopping for good",
        )),
        JobState::Running
            if job
                .pause_requested
                .as_ref()
                .is_some_and(|p| p.immediate || !immediate) =>
        {
            Ok(Outcome::Unchanged)
        }
        JobState::Running => {
            let request = PauseRequest {
                requested_at: now,
                requested_by: user_id.map(str::to_string),
                immediate,
                reason: PauseReason::Operator,
            };
            job.pause_requested = Some(request.clone());
            job.updated_at = now;
            let message = if immediate {
                "pause requested: the running step is stopped"
            } else {
                "pause requested: the job pauses after the running step"
            };
            Ok(changed(vec![PendingEvent::new(
                events::JOB_PAUSE_REQUESTED,
                EventLevel::Warn,
                message.to_string(),
                &request,
            )]))
        }
        JobState::Queued => {
            job.updated_at = now;
            job.pause_requested = Some(PauseRequest {
                requested_at: now,
                requested_by: user_id.map(str::to_string),
                immediate,
                reason: PauseReason::Operator,
            });
            let paused = pause_now(job, CancelledBy::User, None, None);
            Ok(changed(vec![paused]))
        }
        JobState::AwaitingApproval => Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job waits for approval, holding nothing; approve or reject it",
        )),
        JobState::Succeeded | JobState::Failed | JobState::Cancelled | JobState::DeadLetter => {
            Err(QueueError::conflict(
                &job.id,
                job.status,
                "a job that has ended cannot be paused; retry it from a step instead",
            ))
        }
    }
}

/// running (pause requested) → paused, by the worker holding the lease, which stopped at
/// a boundary or stopped its step; `checkpoint` is the latest its attempt saved. A cancel
/// requested meanwhile wins: the job ends cancelled. `paused_by` is the fence recorded by
/// the `job.paused` event of an already-paused job: the same worker and attempt
/// acknowledging again gets a no-op, anyone else a refusal.
pub(crate) fn ack_pause(
    job: &mut Job,
    fence: &Fence,
    now: DateTime<Utc>,
    checkpoint: Option<CheckpointSaved>,
    paused_by: Option<&Fence>,
) -> Result<Outcome, QueueError> {
    if job.status == JobState::Paused && paused_by == Some(fence) {
        return Ok(Outcome::Unchanged);
    }
    check_fence(job, fence)?;
    if job.cancel_requested_at.is_some() {
        job.pause_requested = None;
        return ack_cancel(job, fence, now, None);
    }
    if job.pause_requested.is_none() {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "no pause was requested; complete or fail the job instead",
        ));
    }
    job.updated_at = now;
    let paused = pause_now(job, CancelledBy::Worker, Some(fence), checkpoint);
    Ok(changed(vec![paused]))
}

/// paused → queued, to start from `checkpoint` (`None` keeps the one it paused at), at the
/// step after it of the task's `step_count`. On a running job it withdraws a pause request not
/// yet obeyed. A queued job, or a running one with no pause pending, is left alone.
pub(crate) fn resume(
    job: &mut Job,
    user_id: Option<&str>,
    checkpoint: Option<CheckpointSaved>,
    step_count: usize,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    match job.status {
        JobState::Queued => Ok(Outcome::Unchanged),
        JobState::Running if job.pause_requested.is_none() => Ok(Outcome::Unchanged),
        JobState::Running | JobState::Paused if job.budget_overrun().is_some() => {
            Err(budget_spent(job))
        }
        JobState::Running | JobState::Paused => {
            let paused = job.status == JobState::Paused;
            job.pause_requested = None;
            job.updated_at = now;
            if paused {
                if checkpoint.is_some() {
                    job.resume_from = checkpoint;
                }
                job.status = JobState::Queued;
                job.next_attempt_at = now;
            }
            job.derive();
            let requeued = Requeued {
                requested_by: user_id.map(str::to_string),
                from_step_index: job
                    .resume_from
                    .as_ref()
                    .map_or(0, |saved| saved.resume_step(step_count)),
                resume_from: job.resume_from.clone(),
            };
            let message = match (&requeued.resume_from, paused) {
                (_, false) => "resumed: the pause request is withdrawn".to_string(),
                (Some(saved), true) => format!("resumed {}", saved.label()),
                (None, true) => "resumed from the start".to_string(),
            };
            Ok(Outcome::Changed {
                events: vec![PendingEvent::new(
                    events::JOB_RESUMED,
                    EventLevel::Info,
                    message,
                    &requeued,
                )],
                available: paused,
            })
        }
        JobState::AwaitingApproval => Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job waits for approval, not a resume; approve or reject it",
        )),
        JobState::Succeeded | JobState::Failed | JobState::Cancelled | JobState::DeadLetter => {
            Err(QueueError::conflict(
                &job.id,
                job.status,
                "only a paused job can be resumed; retry a job that has ended from a step",
            ))
        }
    }
}

/// failed, cancelled or dead_letter → queued, a new attempt that restores `checkpoint` and
/// runs from step `from_step_index` (`checkpoint` `None`: from the start). The attempts
/// the queue grants itself are not renewed: the operator's retry is one more attempt.
pub(crate) fn retry_from_step(
    job: &mut Job,
    user_id: Option<&str>,
    checkpoint: Option<CheckpointSaved>,
    from_step_index: usize,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    if !job.status.is_retryable_by_operator() {
        let why = match job.status {
            JobState::Paused => "a paused job is resumed, not retried",
            JobState::AwaitingApproval => "a job awaiting approval is approved or rejected",
            JobState::Succeeded => "a job that succeeded cannot be retried; submit a new one",
            _ => "only a job that failed, was cancelled or was dead-lettered can be retried",
        };
        return Err(QueueError::conflict(&job.id, job.status, why));
    }
    if job.budget_overrun().is_some() {
        return Err(budget_spent(job));
    }
    queue_again(job, checkpoint, now);
    let requeued = Requeued {
        requested_by: user_id.map(str::to_string),
        from_step_index,
        resume_from: job.resume_from.clone(),
    };
    let message = match &requeued.resume_from {
        Some(saved) => format!(
            "retry requested: from step {}, {}",
            from_step_index + 1,
            saved.label()
        ),
        None => format!("retry requested: from step {}", from_step_index + 1),
    };
    Ok(Outcome::Changed {
        events: vec![PendingEvent::new(
            events::JOB_RETRY_REQUESTED,
            EventLevel::Info,
            message,
            &requeued,
        )],
        available: true,
    })
}

/// An ended job queued again for a new attempt from `checkpoint`: what its last attempt
/// ended with (its result, its error, a cancel, a pause) is cleared, and the approval too,
/// since the steps that run again are reviewed again.
pub(super) fn queue_again(job: &mut Job, checkpoint: Option<CheckpointSaved>, now: DateTime<Utc>) {
    job.status = JobState::Queued;
    job.claimed_by = None;
    job.lease_expires_at = None;
    job.next_attempt_at = now;
    job.finished_at = None;
    job.result_summary = None;
    job.error_message = None;
    job.cancel_requested_at = None;
    job.cancel_requested_by_user_id = None;
    job.cancel_reason = None;
    job.pause_requested = None;
    job.resume_from = checkpoint;
    job.approval = None;
    job.updated_at = now;
    job.derive();
}

/// The fence of the worker whose own acknowledgement paused the job, read back from the
/// `job.paused` event; `None` if a user or the rescuer paused it.
pub(crate) fn paused_by(payload: &serde_json::Map<String, serde_json::Value>) -> Option<Fence> {
    let paused: Paused = contract::events::read_payload(payload)?;
    match (paused.by, paused.worker_id, paused.attempt) {
        (CancelledBy::Worker, Some(worker_id), Some(attempt)) => Some(Fence { worker_id, attempt }),
        _ => None,
    }
}
