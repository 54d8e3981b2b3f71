//! A job's budget: the pause its usage asks for once a limit is reached, the refusal to
//! run a job whose budget is spent, and an operator setting a new budget.

use chrono::{DateTime, Utc};
use contract::events::{BudgetChanged, BudgetExceeded, PauseReason, PauseRequest};
use contract::job::events;
use contract::{EventLevel, Job, JobBudget, JobState};

use super::{Outcome, PendingEvent, changed};
use crate::error::QueueError;

/// Refuses to run a job whose budget is spent: it would stop again before its first step.
pub(super) fn budget_spent(job: &Job) -> QueueError {
    let spent = job
        .budget_overrun()
        .map(|o| format!("{} ({})", o.describe(), o.limit))
        .unwrap_or_default();
    QueueError::conflict(
        &job.id,
        job.status,
        format!(
            "its budget is spent: {spent}; raise it with POST /api/queue/jobs/{}/budget first",
            job.id
        ),
    )
}

/// The job's usage has reached a limit of its budget: a running job is asked to pause,
/// at the next boundary or, for `maxMinutes`, at once (its worker stops the step itself).
/// Said once: a job already asked to pause for its budget, or stopping for good, is left
/// as it is.
pub(crate) fn pause_for_budget(job: &mut Job, now: DateTime<Utc>) -> Outcome {
    let (Some(overrun), Some(budget)) = (job.budget_overrun(), job.budget()) else {
        return Outcome::Unchanged;
    };
    let asked = job
        .pause_requested
        .as_ref()
        .is_some_and(|p| p.reason == PauseReason::Budget || p.immediate);
    if job.status != JobState::Running || job.cancel_requested_at.is_some() || asked {
        return Outcome::Unchanged;
    }
    let immediate = overrun.limit == contract::BudgetLimit::Minutes;
    let request = PauseRequest {
        requested_at: now,
        requested_by: None,
        immediate,
        reason: PauseReason::Budget,
    };
    job.pause_requested = Some(request.clone());
    job.updated_at = now;
    let when = if immediate {
        "the running step is stopped"
    } else {
        "the job pauses after the running step"
    };
    let exceeded = BudgetExceeded { overrun, budget };
    changed(vec![
        PendingEvent::new(
            events::JOB_BUDGET_EXCEEDED,
            EventLevel::Warn,
            format!("budget reached: {} ({})", overrun.describe(), overrun.limit),
            &exceeded,
        ),
        PendingEvent::new(
            events::JOB_PAUSE_REQUESTED,
            EventLevel::Warn,
            format!("pause requested for the budget: {when}"),
            &request,
        ),
    ])
}

/// Sets the job's budget (`task.budget` of its payload), in any state: raised on a job
/// paused for its budget, it may then be resumed. The same budget again changes nothing.
pub(crate) fn set_budget(
    job: &mut Job,
    user_id: Option<&str>,
    budget: JobBudget,
    now: DateTime<Utc>,
) -> Result<Outcome, QueueError> {
    let was = job.budget();
    if was == Some(budget) {
        return Ok(Outcome::Unchanged);
    }
    let Some(task) = std::sync::Arc::make_mut(&mut job.payload)
        .get_mut("task")
        .and_then(|t| t.as_object_mut())
    else {
        return Err(QueueError::conflict(
            &job.id,
            job.status,
            "the job's payload is not a task; it has no budget",
        ));
    };
    let value =
        serde_json::to_value(budget).map_err(|e| QueueError::invalid("budget", e.to_string()))?;
    task.insert("budget".into(), value);
    job.updated_at = now;
    let left = match job.budget_overrun() {
        Some(overrun) => format!("still spent: {}", overrun.describe()),
        None => budget.summary(&job.usage.unwrap_or_default()),
    };
    let changed_to = BudgetChanged {
        requested_by: user_id.map(str::to_string),
        budget,
        was,
    };
    Ok(changed(vec![PendingEvent::new(
        events::JOB_BUDGET_CHANGED,
        EventLevel::Info,
        format!("budget set: {left}"),
        &changed_to,
    )]))
}
