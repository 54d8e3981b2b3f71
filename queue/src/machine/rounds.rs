//! A follow-up on a job that ended: its next round, with the steps it adds, queued again
//! from the work the job last produced, as the same job (its id, history, branch and pull
//! request kept).

use chrono::{DateTime, Utc};
use contract::events::CheckpointSaved;
use contract::job::events;
use contract::{EventLevel, Job, JobState};
use serde_json::{Value, json};

use super::budget::budget_spent;
use super::pauses::queue_again;
use super::{Outcome, PendingEvent};
use crate::error::QueueError;

/// Only a job that succeeded or failed takes a follow-up: one still under way takes more
/// steps instead, and a cancelled one is retried.
pub(crate) fn check_follow_up(job: &Job) -> Result<(), QueueError> {
    let why = match job.status {
        JobState::Succeeded | JobState::Failed => {
            return match job.budget_overrun() {
                Some(_) => Err(budget_spent(job)),
                None => Ok(()),
            };
        }
        JobState::Queued | JobState::Running | JobState::Paused | JobState::AwaitingApproval => {
            "the job has not ended: add the steps to it instead (POST /api/queue/jobs/{id}/steps)"
        }
        JobState::Cancelled | JobState::DeadLetter => {
            "a cancelled or dead-lettered job is retried, not followed up (POST /api/queue/jobs/{id}/retry)"
        }
    };
    Err(QueueError::conflict(
        &job.id,
        job.status,
        why.replace("{id}", &job.id.to_string()),
    ))
}

/// Stores `payload` (the task with the round's steps and the round recorded, already
/// normalized) and queues the job to run them from `start`. `expected` is the payload the
/// round was made from: a job whose task changed meanwhile is refused.
pub(crate) fn follow_up(
    job: &mut Job,
    user_id: Option<&str>,
    expected: &Value,
    payload: Value,
    start: CheckpointSaved,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    check_follow_up(job)?;
    if *job.payload != *expected {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job's task changed while the follow-up was made; read it again and retry",
        ));
    }
    let round = start.round.unwrap_or(2);
    let from = start.steps_done.unwrap_or(0);
    job.payload = std::sync::Arc::new(payload);
    let from_branch = start
        .branch
        .as_deref()
        .map(|b| format!(", from branch {b}"))
        .unwrap_or_default();
    queue_again(job, Some(start), now);
    let message = format!(
        "follow-up: round {round} queued, from step {}{from_branch}",
        from + 1
    );
    let requested = json!({
        "requestedBy": user_id,
        "round": round,
        "fromStepIndex": from,
        "resumeFrom": job.resume_from,
    });
    Ok(Outcome::Changed {
        events: vec![PendingEvent::new(
            events::JOB_FOLLOW_UP_REQUESTED,
            EventLevel::Info,
            message,
            &requested,
        )],
        available: true,
    })
}

/// The job's pull request has feedback no round of its own will take: a person is asked
/// to look. Said only of a job that ended; the job stays as it is.
pub(crate) fn needs_attention(
    job: &mut Job,
    asked: &contract::events::NeedsAttention,
    now: DateTime<Utc>,
) -> Outcome {
    if !job.status.is_terminal() {
        return Outcome::Unchanged;
    }
    job.updated_at = now;
    Outcome::Changed {
        events: vec![PendingEvent::new(
            events::JOB_NEEDS_ATTENTION,
            EventLevel::Warn,
            format!("needs attention: {}", asked.reason),
            asked,
        )],
        available: false,
    }
}
