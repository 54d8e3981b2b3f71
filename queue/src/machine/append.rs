//! Steps appended to a job that has not run them yet: a queued or paused job takes them
//! as they are; a running one while a step of its attempt is still to end (its worker
//! reads them at the next step boundary); a job awaiting approval goes back to the queue
//! to run them (then asks again).

use chrono::{DateTime, Utc};
use contract::job::events;
use contract::timeline::{StepState, Timeline};
use contract::{Approval, EventLevel, Job, JobState};
use serde_json::{Value, json};

use super::{Outcome, PendingEvent};
use crate::error::QueueError;

/// Whether the job may take more steps now: queued, paused, running or awaiting
/// approval. A running job is checked again, against its steps, by [`check_steps_pending`].
pub(crate) fn check_appendable(job: &Job) -> Result<(), QueueError> {
    match job.status {
        JobState::Queued | JobState::Paused | JobState::Running | JobState::AwaitingApproval => {
            Ok(())
        }
        _ => Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job has ended; retry it, or submit a new one with the steps",
        )),
    }
}

/// A running job takes steps only while one of its attempt's steps is still to end: its
/// worker reads the job's steps at every step boundary and, once the last step's end has
/// reached the queue, one last time. After that end the steps are sealed (the completion
/// loop, the gate or publish follow), so this must be read under the job's lock, which
/// every worker event takes too. `timeline` is the job's, folded over its steps.
pub(crate) fn check_steps_pending(job: &Job, timeline: &Timeline) -> Result<(), QueueError> {
    let approved = job.approval.as_ref().is_some_and(Approval::is_approved);
    let pending = timeline
        .steps
        .iter()
        .any(|step| step.state != StepState::Succeeded);
    if job.status != JobState::Running || (pending && !approved) {
        return Ok(());
    }
    let gated = job.payload["task"]["publish"]["approval"] == "required" && !approved;
    Err(QueueError::conflict(
        &job.id,
        job.status,
        if gated {
            "its steps have all run and it is past them, on its way to the approval gate; \
             add the step once it awaits approval, which sends it back to run it"
        } else {
            "its steps have all run and it is past them (the completion loop or publish); \
             once it has ended, retry it from a step or submit a new task"
        },
    ))
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
    if *job.payload != *expected {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job's steps changed while these were added; read it again and retry",
        ));
    }
    job.payload = std::sync::Arc::new(payload);
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
