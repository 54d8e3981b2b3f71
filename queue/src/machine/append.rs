//! Steps appended to a job that has not run them yet: a queued or paused job takes them
//! as they are; a job awaiting approval goes back to the queue to run them (then asks
//! again). A running job is refused for now: pause it, append, resume.

use chrono::{DateTime, Utc};
use contract::job::events;
use contract::{EventLevel, Job, JobState};
use serde_json::{Value, json};

use super::{Outcome, PendingEvent};
use crate::error::QueueError;

/// Whether the job may take more steps now: queued, paused or awaiting approval.
pub(crate) fn check_appendable(job: &Job) -> Result<(), QueueError> {
    let why = match job.status {
        JobState::Queued | JobState::Paused | JobState::AwaitingApproval => return Ok(()),
        JobState::Running => {
            "a running job takes no steps yet: pause it, append them, then resume it"
        }
        _ => "the job has ended; retry it, or submit a new one with the steps",
    };
    Err(QueueError::conflict(&job.id, job.status, why))
}

/// Stores `payload` (the task with the steps added, already normalized) on the job: from
/// `before` steps to `total`. `expected` is the payload the steps were added to: a job
/// whose task changed meanwhile is refused, so two appends never lose one another.
pub(crate) fn append_steps(
    job: &mut Job,
    user_id: Option<&str>,
    expected: &Value,
    payload: Value,
    (before, total): (usize, usize),
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    check_appendable(job)?;
    if &job.payload != expected {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job's steps changed while these were added; read it again and retry",
        ));
    }
    job.payload = payload;
    job.updated_at = now;
    let back_to_work = job.status == JobState::AwaitingApproval;
    if back_to_work {
        // Sent back from the gate: the new steps run after its kept work, and the result
        // is reviewed again.
        job.status = JobState::Queued;
        job.approval = None;
        job.next_attempt_at = now;
    }
    let added = total - before;
    let message = if back_to_work {
        format!("{added} step(s) appended; sent back from approval to run them")
    } else {
        format!("{added} step(s) appended: {total} in all")
    };
    let appended = json!({
        "requestedBy": user_id,
        "added": added,
        "stepCount": total,
    });
    Ok(Outcome::Changed {
        events: vec![PendingEvent::new(
            events::JOB_STEPS_APPENDED,
            EventLevel::Info,
            message,
            &appended,
        )],
        available: back_to_work,
    })
}
