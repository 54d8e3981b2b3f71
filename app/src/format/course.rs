//! What the job page says of an operator's hold on a job: why it paused, which round it
//! is in, what its pull request's feedback does, and its budget as the page shows it and
//! its form edits it.

use contract::Job;
use contract::events::PauseReason;

/// The job's budget for its page: shown when it has one, and offered for editing on any
/// task.
pub(super) fn budget(
    job: &Job,
    task: Option<&contract::NormalizedTask>,
) -> Option<crate::views::BudgetView> {
    let task = task?;
    let budget = task.payload.task.budget.unwrap_or_default();
    let text = |n: Option<f64>| n.map(|n| n.to_string()).unwrap_or_default();
    Some(crate::views::BudgetView {
        used: budget.summary(&job.usage.unwrap_or_default()),
        spent: job.budget_overrun().is_some(),
        cost_usd: text(budget.max_cost_usd),
        tokens: budget.max_tokens.map(|n| n.to_string()).unwrap_or_default(),
        minutes: text(budget.max_minutes),
        priced: contract::budget::priced(task.payload.task.runtime.mode),
    })
}

/// Why a paused job paused.
pub(super) fn paused(job: &Job) -> Option<String> {
    Some(match job.pause_reason? {
        PauseReason::Budget => "its budget is spent: raise it to resume".to_string(),
        PauseReason::Operator => {
            let by = job
                .pause_requested
                .as_ref()
                .and_then(|p| p.requested_by.as_deref());
            format!("by {}", by.unwrap_or("an operator"))
        }
    })
}

/// A follow-up's round, and the step it starts at.
pub(super) fn round(job: &Job, task: Option<&contract::NormalizedTask>) -> Option<String> {
    if job.round < 2 {
        return None;
    }
    let last = task.and_then(|t| t.payload.task.rounds.last());
    let first = last
        .map(|r| format!(", from step {}", r.from_step + 1))
        .unwrap_or_default();
    let what = match last {
        Some(r) if !r.causes.is_empty() => "a round of pull request feedback",
        _ => "a follow-up",
    };
    Some(format!("{} ({what}{first})", job.round))
}

/// What the server does with the pull request's checks and reviews, and the rounds of
/// feedback used so far.
pub(super) fn feedback(task: Option<&contract::NormalizedTask>) -> Option<String> {
    let spec = &task?.payload.task;
    let feedback = spec.publish.feedback?;
    let watched = match (feedback.ci, feedback.reviews) {
        (true, true) => "failed checks and reviews asking for changes",
        (true, false) => "failed checks",
        _ => "reviews asking for changes",
    };
    Some(format!(
        "{watched} on its pull request become rounds ({} of {} used)",
        spec.feedback_rounds(),
        feedback.max_rounds
    ))
}
