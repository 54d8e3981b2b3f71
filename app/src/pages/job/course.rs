//! The job's course, as an operator steers it: pause a queued or running job, resume a
//! paused one, retry one that ended from a step, approve or reject one at the gate beside
//! its diff, add a step to one that has not ended, follow up on one that ended, set its
//! budget. Plain form posts to the server functions
//! below (the server answers with a redirect back to the page), rendered on the server
//! outside the live island, so they cost the browser bundle nothing; the page shows the
//! job as it is after each.

use contract::{JobState, StepState};
use leptos::prelude::*;

use crate::error::AppError;
use crate::views::JobView;

/// Pauses the job as the logged-in operator: `now` ("on") stops the running step.
#[server]
pub async fn pause_job(id: String, now: Option<String>) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    let immediate = now.is_some_and(|v| !v.is_empty());
    ssr::queue()?
        .request_pause(&id, Some(&user.name), immediate)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// Resumes a paused job from the checkpoint it paused at.
#[server]
pub async fn resume_job(id: String) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    ssr::queue()?
        .resume(&id, Some(&user.name), None)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// Retries a job that ended from step `from_step` (numbered from 1, as the page shows).
#[server]
pub async fn retry_job(id: String, from_step: String) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    let from = match from_step.trim().parse::<usize>() {
        Ok(n) if n >= 1 => n - 1,
        _ => {
            return Err(ssr::invalid("fromStep", "choose a step, numbered from 1"));
        }
    };
    ssr::queue()?
        .retry_from_step(&id, Some(&user.name), Some(from))
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// Approves a job awaiting approval: it is queued to publish its kept work.
#[server]
pub async fn approve_job(id: String) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    ssr::queue()?
        .approve(&id, Some(&user.name))
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// Rejects a job awaiting approval with `reason`: it fails, nothing is published.
#[server]
pub async fn reject_job(id: String, reason: String) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    let reason = Some(reason.trim().to_string()).filter(|r| !r.is_empty());
    ssr::queue()?
        .reject(&id, Some(&user.name), reason)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// Adds one step, with `instructions`, after the job's own: checked as at submit.
#[server]
pub async fn add_step(id: String, instructions: String) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    if instructions.trim().is_empty() {
        return Err(ssr::invalid(
            "steps[0].instructions",
            "write what the new step should do",
        ));
    }
    let steps = serde_json::json!([{ "instructions": instructions }]);
    ssr::queue()?
        .append_steps(&id, Some(&user.name), &steps)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// Sets the job's budget from the form's limits (blank: no limit of that kind), replacing
/// the one it had.
#[server]
pub async fn set_budget(
    id: String,
    max_cost_usd: Option<String>,
    max_tokens: String,
    max_minutes: String,
) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    let mut budget = serde_json::Map::new();
    let fields = [
        ("maxCostUsd", max_cost_usd.unwrap_or_default()),
        ("maxTokens", max_tokens),
        ("maxMinutes", max_minutes),
    ];
    for (key, text) in fields {
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        // The queue checks the number; text that is not one is named here.
        let number: serde_json::Value = serde_json::from_str(text)
            .ok()
            .filter(serde_json::Value::is_number)
            .ok_or_else(|| ssr::invalid(key, "must be a number"))?;
        budget.insert(key.to_string(), number);
    }
    ssr::queue()?
        .set_budget(&id, Some(&user.name), &serde_json::Value::Object(budget))
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// The form that sets the job's budget, prefilled with the one it has.
fn budget_form(id: String, budget: crate::views::BudgetView) -> impl IntoView {
    let action = <SetBudget as leptos::server_fn::ServerFn>::url();
    let cost = budget.priced.then(|| view! {
        <label for="budget-usd">"Cost (US dollars)"</label>
        <input id="budget-usd" type="number" name="max_cost_usd" min="0" step="any" value=budget.cost_usd/>
    });
    let said = if budget.spent {
        "Its budget is spent: the job waits until a limit is raised."
    } else {
        "What the job may spend in all, every step, iteration and attempt counted. Blank: no limit."
    };
    view! {
        <form method="post" action=action class="budget" data-testid="budget-form">
            <input type="hidden" name="id" value=id/>
            <p class="muted">{said}</p>
            {cost}
            <label for="budget-tokens">"Tokens (input and output)"</label>
            <input id="budget-tokens" type="number" name="max_tokens" min="1" step="1" value=budget.tokens/>
            <label for="budget-minutes">"Agent minutes"</label>
            <input id="budget-minutes" type="number" name="max_minutes" min="0" step="any" value=budget.minutes/>
            <button type="submit" data-testid="set-budget">"Set budget"</button>
        </form>
    }
}

/// Follows up on an ended job with one step of `instructions`: its next round.
#[server]
pub async fn follow_up(id: String, instructions: String) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    if instructions.trim().is_empty() {
        return Err(ssr::invalid(
            "instructions",
            "write what the follow-up should do",
        ));
    }
    let body = serde_json::json!({ "instructions": instructions });
    ssr::queue()?
        .follow_up(&id, Some(&user.name), &body)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// The form that follows up on a job that succeeded or failed.
fn follow_up_form(id: String) -> impl IntoView {
    let action = <FollowUp as leptos::server_fn::ServerFn>::url();
    view! {
        <form method="post" action=action class="follow-up" data-testid="follow-up-form">
            <input type="hidden" name="id" value=id/>
            <label for="follow-up-instructions">"Follow up: what to do next"</label>
            <textarea id="follow-up-instructions" name="instructions" rows="3" required></textarea>
            <button type="submit" data-testid="follow-up">"Follow up"</button>
            <p class="muted">"The job runs again as its next round: only this step, from the work it last pushed, published to the same branch and pull request."</p>
        </form>
    }
}

/// The form that adds a step, for a job that may still take one.
fn add_step_form(id: String, status: JobState) -> impl IntoView {
    let action = <AddStep as leptos::server_fn::ServerFn>::url();
    let when = match status {
        JobState::Running => "It runs after the current steps, in this attempt.",
        JobState::AwaitingApproval => "The job goes back to run it, then asks for approval again.",
        _ => "It runs after the others.",
    };
    view! {
        <form method="post" action=action class="add-step">
            <input type="hidden" name="id" value=id/>
            <label for="add-step-instructions">"New step's instructions"</label>
            <textarea id="add-step-instructions" name="instructions" rows="3" required></textarea>
            <button type="submit" data-testid="add-step">"Add step"</button>
            <p class="muted">{when}</p>
        </form>
    }
}

/// The diff an operator approves or rejects, read on the server like its artifact page.
#[component]
fn Changes(id: String, artifact: String) -> impl IntoView {
    let page = Resource::new(
        move || (id.clone(), artifact.clone()),
        |(id, artifact)| crate::pages::artifact::load_artifact(id, artifact),
    );
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Reading the changes…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => {
                        let cut = page.truncated.then(|| view! {
                            <p class="notice-text" role="status">"Only the start of the changes is shown; their page has a download of them all."</p>
                        });
                        view! { {cut} {crate::pages::artifact::content_view(page.content)} }.into_any()
                    }
                    Err(e) => view! {
                        <p class="error" role="alert">"Could not read the changes: " {e.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The forms that fit the job's state, for an operator; nothing for a viewer.
#[component]
pub fn CourseSection(view: JobView) -> impl IntoView {
    if !view.may_cancel {
        return None;
    }
    let id = view.id.clone();
    let add = (!view.status.is_terminal()).then(|| add_step_form(id.clone(), view.status));
    let follow = matches!(view.status, JobState::Succeeded | JobState::Failed)
        .then(|| follow_up_form(id.clone()));
    // A job paused for its budget, or followed up on, may need it raised first.
    let budget = view.budget.clone().map(|b| budget_form(id.clone(), b));
    let form = match view.status {
        JobState::Queued | JobState::Running => {
            let action = <PauseJob as leptos::server_fn::ServerFn>::url();
            view! {
                <p class="muted">"Pausing keeps the work done so far as a checkpoint; resuming continues from it."</p>
                <form method="post" action=action class="inline">
                    <input type="hidden" name="id" value=id.clone()/>
                    <button type="submit" data-testid="pause">"Pause after the running step"</button>
                </form>
                <form method="post" action=action class="inline">
                    <input type="hidden" name="id" value=id/>
                    <input type="hidden" name="now" value="on"/>
                    <button type="submit" class="danger" data-testid="pause-now">"Pause now (stops the running step)"</button>
                </form>
            }
            .into_any()
        }
        JobState::Paused => {
            let action = <ResumeJob as leptos::server_fn::ServerFn>::url();
            view! {
                <form method="post" action=action class="inline">
                    <input type="hidden" name="id" value=id/>
                    <button type="submit" data-testid="resume">"Resume"</button>
                </form>
            }
            .into_any()
        }
        JobState::Failed | JobState::Cancelled | JobState::DeadLetter => {
            let action = <RetryJob as leptos::server_fn::ServerFn>::url();
            // The step that did not succeed is the default; any step before it may be chosen.
            let failed = view
                .steps
                .iter()
                .position(|s| s.state != StepState::Succeeded)
                .unwrap_or(view.steps.len().saturating_sub(1));
            let options = view
                .steps
                .iter()
                .take(failed + 1)
                .map(|s| {
                    let label = format!("{}. {}", s.number, s.title);
                    view! { <option value=s.number.to_string() selected=s.index == failed>{label}</option> }
                })
                .collect_view();
            view! {
                <form method="post" action=action>
                    <input type="hidden" name="id" value=id/>
                    <label for="retry-from">"Retry from step"</label>
                    <select id="retry-from" name="from_step">{options}</select>
                    <button type="submit" data-testid="retry">"Retry"</button>
                    <p class="muted">"The steps before it are not run again: their work is restored from its checkpoint."</p>
                </form>
            }
            .into_any()
        }
        JobState::AwaitingApproval => {
            let approve = <ApproveJob as leptos::server_fn::ServerFn>::url();
            let reject = <RejectJob as leptos::server_fn::ServerFn>::url();
            let changes = view
                .artifacts
                .iter()
                .find(|a| a.name == contract::job::task::CHANGES_PATCH)
                .map(|a| {
                    let artifact = a.href.rsplit('/').next().unwrap_or_default().to_string();
                    view! {
                        <p><a href=a.href.clone() data-testid="changes">"The changes on their own page (" {a.name.clone()} ")"</a></p>
                        <Changes id=id.clone() artifact/>
                    }
                });
            view! {
                <p>"The steps are done. Nothing is published until an operator approves."</p>
                {changes}
                <form method="post" action=approve class="inline">
                    <input type="hidden" name="id" value=id.clone()/>
                    <button type="submit" data-testid="approve">"Approve and publish"</button>
                </form>
                <form method="post" action=reject>
                    <input type="hidden" name="id" value=id/>
                    <label for="reject-reason">"Reason (optional)"</label>
                    <input id="reject-reason" type="text" name="reason" autocomplete="off"/>
                    <button type="submit" class="danger" data-testid="reject">"Reject"</button>
                </form>
            }
            .into_any()
        }
        JobState::Succeeded => ().into_any(),
    };
    let title = match view.status {
        JobState::AwaitingApproval => "Approval",
        JobState::Succeeded => "Follow up",
        _ => "Pause, resume, retry",
    };
    Some(view! {
        <section class="card" aria-labelledby="course-title">
            <h2 id="course-title">{title}</h2>
            {form}
            {follow}
            {budget}
            {add}
        </section>
    })
}
