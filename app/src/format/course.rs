//! What the job page says of an operator's hold on a job: why it paused, which round it
//! is in, and its budget as the page shows it and its form edits it.

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
    let first = task
        .and_then(|t| t.payload.task.rounds.last())
        .map(|r| format!(", from step {}", r.from_step + 1))
        .unwrap_or_default();
    Some(format!("{} (a follow-up{first})", job.round))
}
