//! The job state machine: one pure function per named transition. Each runs on a row the
//! caller has locked, checks its guard, edits the job and says which events to append; the
//! service writes all of it in one transaction. Keeping this free of SQL is what lets both
//! backends share it unchanged. The events of a job's creation and claim, which other
//! code writes too (the claim statements), are in `machine/recorded.rs`.

use chrono::{DateTime, Utc};
use contract::events::{
    Cancelled, CancelledBy, CheckpointSaved, LeaseHeld, Retried, WithReason, WorkerCall,
    WorkerFailure, payload_of,
};
use contract::job::events;
use contract::{EventLevel, Job, JobEvent, JobId, JobState};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::QueueError;
use crate::lease::Fence;

/// An event to append in the transaction of the change that caused it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingEvent {
    pub kind: String,
    pub level: EventLevel,
    pub message: String,
    pub payload: Map<String, Value>,
}

impl PendingEvent {
    /// The event as stored: its id and time assigned.
    pub(crate) fn stored(&self, job_id: &JobId, id: i64, at: DateTime<Utc>) -> JobEvent {
        JobEvent {
            id,
            job_id: *job_id,
            kind: self.kind.clone(),
            level: self.level,
            message: self.message.clone(),
            payload: self.payload.clone(),
            created_at: at,
        }
    }

    pub(crate) fn new(
        kind: &str,
        level: EventLevel,
        message: String,
        payload: &impl Serialize,
    ) -> Self {
        PendingEvent {
            kind: kind.to_string(),
            level,
            message,
            payload: payload_of(payload),
        }
    }
}

#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Nothing to write: an idempotent repeat.
    Unchanged,
    /// Save the row, but tell nobody: a heartbeat only moves the lease.
    LeaseExtended,
    /// Save the row, append the events, notify; `available` when the job became claimable.
    Changed {
        events: Vec<PendingEvent>,
        available: bool,
    },
}

pub(super) fn changed(events: Vec<PendingEvent>) -> Outcome {
    Outcome::Changed {
        events,
        available: false,
    }
}

/// What a retry needs to know: when, and how long from now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry {
    pub at: DateTime<Utc>,
    pub delay_ms: i64,
}

/// The guard of every worker write: the job is running, leased to this worker, on this attempt.
///
/// A finished job answers StateConflict (there is nothing left to own); a queued job, or a
/// job leased to another worker or a later attempt, answers OwnershipMismatch.
pub(crate) fn check_fence(job: &Job, fence: &Fence) -> Result<(), QueueError> {
    if job.status.is_terminal() {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job has already finished",
        ));
    }
    let owner = job.claimed_by.as_deref() == Some(fence.worker_id.as_str());
    if job.status == JobState::Running && owner && job.attempt == fence.attempt {
        return Ok(());
    }
    Err(QueueError::not_owner(
        &job.id,
        format!(
            "{} holds attempt {}, but {}",
            fence.worker_id,
            fence.attempt,
            holder(job)
        ),
    ))
}

/// Who holds `job` now, as a refused worker is told.
fn holder(job: &Job) -> String {
    match (&job.status, &job.claimed_by) {
        (JobState::Running, Some(worker)) => {
            format!("it is leased to {worker} on attempt {}", job.attempt)
        }
        _ => format!("it is {} (attempt {})", job.status, job.attempt),
    }
}

/// The fence of the lease `worker_id` holds on `job` now, for a worker that names no
/// attempt (the seed system's worker sends none): the write that follows is fenced on it,
/// so it still fails if the lease moves on meanwhile.
pub(crate) fn held_fence(job: &Job, worker_id: &str) -> Result<Fence, QueueError> {
    let fence = Fence::new(worker_id, job.attempt);
    check_fence(job, &fence).map_err(|error| match error {
        QueueError::OwnershipMismatch { .. } => QueueError::not_owner(
            &job.id,
            format!(
                "{worker_id} sent no attempt and holds no lease on the job: {}",
                holder(job)
            ),
        ),
        other => other,
    })?;
    Ok(fence)
}

fn call(fence: &Fence) -> WorkerCall {
    WorkerCall {
        worker_id: fence.worker_id.clone(),
        attempt: fence.attempt,
    }
}

/// Stamps the claim the claim statement made; the statement itself is backend SQL.
/// queued → running for `worker_id` until `lease_until`: what both claim statements do in
/// SQL, for a job handed straight to a waiting claimer as it is created (`waiters`).
pub(crate) fn claim(
    job: &mut Job,
    worker_id: &str,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) {
    job.status = JobState::Running;
    job.claimed_by = Some(worker_id.to_string());
    job.lease_expires_at = Some(lease_until);
    job.attempt += 1;
    job.started_at = job.started_at.or(Some(now));
    job.updated_at = now;
}

pub(crate) fn heartbeat(
    job: &mut Job,
    fence: &Fence,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    check_fence(job, fence)?;
    job.lease_expires_at = Some(lease_until);
    job.updated_at = now;
    Ok(Outcome::LeaseExtended)
}

/// running → succeeded. A cancel requested meanwhile does not stop it: the work is done,
/// and the job keeps the result it actually had (the request stays visible on the job).
/// A repeat by the same worker and attempt (a retried HTTP call) changes nothing.
pub(crate) fn complete(
    job: &mut Job,
    fence: &Fence,
    now: DateTime<Utc>,
    summary: Option<String>,
) -> Result<Outcome, QueueError> {
    if job.status == JobState::Succeeded
        && job.claimed_by.as_deref() == Some(fence.worker_id.as_str())
        && job.attempt == fence.attempt
    {
        return Ok(Outcome::Unchanged);
    }
    check_fence(job, fence)?;
    // A pause asked too late is moot, as a late cancel is: the work is done.
    job.pause_requested = None;
    job.status = JobState::Succeeded;
    job.result_summary = summary;
    job.lease_expires_at = None;
    job.finished_at = Some(now);
    job.updated_at = now;
    Ok(changed(vec![completed_event(job)]))
}

/// running → queued (retry), failed, dead_letter or cancelled; see [`JobState`].
pub(crate) fn fail(
    job: &mut Job,
    fence: &Fence,
    now: DateTime<Utc>,
    error: String,
    retryable: bool,
    retry: Retry,
) -> Result<Outcome, QueueError> {
    check_fence(job, fence)?;
    let failure = WorkerFailure {
        call: call(fence),
        error: error.clone(),
        retryable,
    };
    job.error_message = Some(error);
    job.lease_expires_at = None;
    job.updated_at = now;
    let pause = job.pause_requested.take();
    if job.cancel_requested_at.is_some() {
        finish_cancelled(job, now);
        let cancelled = cancelled_after(failure, job, CancelledBy::Worker);
        return Ok(changed(vec![PendingEvent::new(
            events::JOB_CANCELLED,
            EventLevel::Warn,
            "cancelled: the worker failed after the cancel was requested".to_string(),
            &cancelled,
        )]));
    }
    if !retryable {
        job.status = JobState::Failed;
        job.finished_at = Some(now);
        return Ok(changed(vec![PendingEvent::new(
            events::JOB_FAILED,
            EventLevel::Error,
            format!("failed on attempt {}", job.attempt),
            &failure,
        )]));
    }
    if job.attempt >= job.max_attempts {
        job.status = JobState::DeadLetter;
        job.finished_at = Some(now);
        return Ok(changed(vec![PendingEvent::new(
            events::JOB_DEAD_LETTERED,
            EventLevel::Error,
            format!(
                "dead-lettered: attempt {} of {} failed",
                job.attempt, job.max_attempts
            ),
            &failure,
        )]));
    }
    if pause.is_some() {
        // Paused rather than retried, as asked; the next attempt starts where this one did.
        let paused = pause_now(job, CancelledBy::Worker, Some(fence), None);
        let message = format!(
            "paused: attempt {} failed after the pause was requested ({})",
            job.attempt, failure.error
        );
        return Ok(changed(vec![paused.with_message(message)]));
    }
    Ok(requeue(job, retry, failure, Vec::new()))
}

/// Back to the queue after `cause` (a failure, an expired lease), to run again at `retry`.
fn requeue(
    job: &mut Job,
    retry: Retry,
    cause: impl Serialize,
    mut out: Vec<PendingEvent>,
) -> Outcome {
    job.status = JobState::Queued;
    job.claimed_by = None;
    job.lease_expires_at = None;
    job.next_attempt_at = retry.at;
    let retried = Retried {
        cause,
        next_attempt_at: retry.at,
        delay_ms: retry.delay_ms,
    };
    out.push(PendingEvent::new(
        events::JOB_RETRY_SCHEDULED,
        EventLevel::Warn,
        format!(
            "retry scheduled: attempt {} of {} in {} ms",
            job.attempt + 1,
            job.max_attempts,
            retry.delay_ms
        ),
        &retried,
    ));
    Outcome::Changed {
        events: out,
        available: true,
    }
}

/// The `job.cancelled` payload of a running job that `cause` ended once its cancel had
/// been requested.
fn cancelled_after<C>(cause: C, job: &Job, by: CancelledBy) -> Cancelled<WithReason<C>> {
    Cancelled {
        cause: WithReason {
            cause,
            reason: job.cancel_reason.clone(),
        },
        by,
    }
}

pub(super) fn finish_cancelled(job: &mut Job, now: DateTime<Utc>) {
    job.status = JobState::Cancelled;
    job.pause_requested = None;
    job.claimed_by = None;
    job.lease_expires_at = None;
    job.finished_at = Some(now);
    job.updated_at = now;
    job.derive();
}

/// A running job whose lease ran out: its worker is presumed gone. Requeued with the
/// attempt kept (the next claim counts the next attempt), cancelled if a cancel was
/// requested, dead-lettered if that was the last attempt. A lease renewed since the
/// rescuer looked (the row is re-read under lock) is left alone.
///
/// A pause requested before the lease ran out is honoured: the job is paused at
/// `checkpoint`, the latest its attempt saved.
pub(crate) fn expire_lease(
    job: &mut Job,
    now: DateTime<Utc>,
    retry: Retry,
    checkpoint: Option<CheckpointSaved>,
) -> Result<Outcome, QueueError> {
    let expired_at = match (job.status, job.lease_expires_at) {
        (JobState::Running, Some(at)) if at < now => at,
        _ => return Ok(Outcome::Unchanged),
    };
    let lease = LeaseHeld {
        worker_id: job.claimed_by.clone(),
        attempt: job.attempt,
        lease_expires_at: Some(expired_at),
    };
    let mut out = vec![PendingEvent::new(
        events::JOB_LEASE_EXPIRED,
        EventLevel::Warn,
        format!(
            "lease of {} expired on attempt {}",
            job.claimed_by.as_deref().unwrap_or("?"),
            job.attempt
        ),
        &lease,
    )];
    job.lease_expires_at = None;
    job.updated_at = now;
    if job.cancel_requested_at.is_some() {
        finish_cancelled(job, now);
        let cancelled = cancelled_after(lease, job, CancelledBy::Rescuer);
        out.push(PendingEvent::new(
            events::JOB_CANCELLED,
            EventLevel::Warn,
            "cancelled: the lease expired after the cancel was requested".to_string(),
            &cancelled,
        ));
        return Ok(changed(out));
    }
    if job.pause_requested.is_some() {
        let paused = pause_now(job, CancelledBy::Rescuer, None, checkpoint);
        let message = format!(
            "{}: the lease expired after the pause was requested",
            paused.message
        );
        out.push(paused.with_message(message));
        return Ok(changed(out));
    }
    if job.attempt >= job.max_attempts {
        job.status = JobState::DeadLetter;
        job.finished_at = Some(now);
        job.error_message = Some(format!(
            "the lease expired on the last attempt ({} of {})",
            job.attempt, job.max_attempts
        ));
        out.push(PendingEvent::new(
            events::JOB_DEAD_LETTERED,
            EventLevel::Error,
            format!(
                "dead-lettered: the lease expired on attempt {} of {}",
                job.attempt, job.max_attempts
            ),
            &lease,
        ));
        return Ok(changed(out));
    }
    Ok(requeue(job, retry, lease, out))
}

mod append;
mod approval;
mod budget;
mod cancel;
mod pauses;
mod rounds;
pub(crate) use append::{append_steps, check_appendable, check_steps_pending};
mod recorded;
pub(crate) use approval::{approve, reject, request_approval};
pub(crate) use budget::{pause_for_budget, set_budget};
pub(crate) use cancel::{ack_cancel, acknowledged_by, request_cancel};
use pauses::pause_now;
pub(crate) use pauses::{ack_pause, paused_by, request_pause, resume, retry_from_step};
pub(crate) use recorded::{claimed_event, completed_event, created_event};
pub(crate) use rounds::{check_follow_up, follow_up, needs_attention};

#[cfg(test)]
mod tests;
