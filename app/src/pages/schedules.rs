//! `/tasks/schedules`: the recurring tasks, each with its cadence, next slot and latest job,
//! the forms that pause, resume and delete one, and the form that makes one. Rendered
//! whole on the server, its forms posting to the server functions beside them, so it
//! costs the browser bundle nothing.

use leptos::prelude::*;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};

use crate::components::table::Table;
use crate::error::AppError;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleView {
    pub id: String,
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub paused: bool,
    pub next: String,
    pub last_job: Option<String>,
    pub skipped: u64,
    pub overlap: String,
    pub catch_up: bool,
}

#[server]
pub async fn list_schedules() -> Result<(Vec<ScheduleView>, bool), AppError> {
    use crate::ssr;
    let user = ssr::user()?;
    let queue = ssr::queue()?;
    let schedules = queue.list_schedules().await.map_err(ssr::refused)?;
    let views = schedules
        .into_iter()
        .map(|s| ScheduleView {
            next: crate::format::when(&s.next_at),
            last_job: s.last_job_id.map(|id| id.to_string()),
            id: s.id,
            name: s.name,
            cron: s.cron,
            timezone: s.timezone,
            paused: s.paused,
            skipped: s.skipped,
            overlap: s.overlap.as_str().to_string(),
            catch_up: s.catch_up,
        })
        .collect();
    Ok((views, user.require_operator().is_ok()))
}

/// Makes a schedule from the form: its task is a job request in JSON.
#[server]
pub async fn create_schedule(
    name: String,
    cron: String,
    timezone: String,
    overlap: String,
    catch_up: Option<String>,
    task: String,
) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let task: serde_json::Value =
        serde_json::from_str(&task).map_err(|e| ssr::invalid("task", &format!("not JSON: {e}")))?;
    let request = serde_json::json!({
        "name": name, "cron": cron, "timezone": timezone, "overlap": overlap,
        "catchUp": catch_up.is_some(), "task": task,
    });
    ssr::queue()?
        .create_schedule(&request, Some(&user.name))
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

#[server]
pub async fn pause_schedule(id: String) -> Result<(), AppError> {
    use crate::ssr;
    ssr::operator()?;
    ssr::queue()?
        .pause_schedule(&id)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

#[server]
pub async fn resume_schedule(id: String) -> Result<(), AppError> {
    use crate::ssr;
    ssr::operator()?;
    ssr::queue()?
        .resume_schedule(&id)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

#[server]
pub async fn delete_schedule(id: String) -> Result<(), AppError> {
    use crate::ssr;
    ssr::operator()?;
    ssr::queue()?
        .delete_schedule(&id)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

#[component]
pub fn SchedulesPage() -> impl IntoView {
    let schedules = Resource::new(|| (), |_| list_schedules());
    view! {
        <Title text="Schedules"/>
        <h1>"Schedules"</h1>
        <Suspense fallback=|| view! { <p class="muted">"Loading the schedules…"</p> }>
            {move || Suspend::new(async move {
                match schedules.await {
                    Ok((list, may_change)) => view! {
                        {if list.is_empty() {
                            view! { <section class="card empty"><p>"No schedule yet: a task that recurs (dependency updates every Monday, a nightly test run) is made below, with `stepwise schedules create`, or by POST /api/queue/schedules."</p></section> }.into_any()
                        } else {
                            view! { <ScheduleTable list may_change/> }.into_any()
                        }}
                        {may_change.then(create_form)}
                    }.into_any(),
                    Err(e) => view! {
                        <p class="error" role="alert">"Could not load the schedules: " {e.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// A form of one button posting `id` to `action`.
fn button(action: String, id: String, label: &'static str, test: &'static str) -> impl IntoView {
    view! {
        <form method="post" action=action class="inline">
            <input type="hidden" name="id" value=id/>
            <button type="submit" data-testid=test>{label}</button>
        </form>
    }
}

#[component]
fn ScheduleTable(list: Vec<ScheduleView>, may_change: bool) -> impl IntoView {
    let rows = list
        .into_iter()
        .map(|s| {
            let (class, state) = if s.paused {
                ("status paused", "paused")
            } else {
                ("status running", "active")
            };
            let last = s.last_job.map(|id| {
                let short: String = id.chars().take(8).collect();
                view! { <a href=format!("/tasks/queue/{id}")>{short}</a> }
            });
            let actions = may_change.then(|| {
                let toggle = if s.paused {
                    button(
                        <ResumeSchedule as leptos::server_fn::ServerFn>::url().to_string(),
                        s.id.clone(),
                        "Resume",
                        "resume-schedule",
                    )
                    .into_any()
                } else {
                    button(
                        <PauseSchedule as leptos::server_fn::ServerFn>::url().to_string(),
                        s.id.clone(),
                        "Pause",
                        "pause-schedule",
                    )
                    .into_any()
                };
                let delete = button(
                    <DeleteSchedule as leptos::server_fn::ServerFn>::url().to_string(),
                    s.id.clone(),
                    "Delete",
                    "delete-schedule",
                );
                view! { {toggle} {delete} }
            });
            let policy = format!(
                "{}{}",
                if s.overlap == "skip" {
                    "skips while the last job runs"
                } else {
                    "queues behind the last job"
                },
                if s.catch_up { "; catches up" } else { "" }
            );
            view! {
                <tr id=format!("schedule-{}", s.id)>
                    <td>{s.name}</td>
                    <td><code>{s.cron}</code>" in "{s.timezone}</td>
                    <td><span class=class>{state}</span></td>
                    <td>{s.next}</td>
                    <td>{last}</td>
                    <td>{s.skipped}</td>
                    <td>{policy}</td>
                    <td>{actions}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <Table class="schedules" headers=&["Name", "When", "State", "Next slot", "Latest job", "Skipped", "Overlap", ""]>
            {rows}
        </Table>
    }
}

fn create_form() -> impl IntoView {
    let action = <CreateSchedule as leptos::server_fn::ServerFn>::url();
    let example = r#"{"payload": {"repository": "octo/hello", "task": {"instructions": "Update the dependencies", "publish": {"mode": "pr"}}}}"#;
    view! {
        <section class="card" aria-labelledby="new-schedule-title">
            <h2 id="new-schedule-title">"New schedule"</h2>
            <form method="post" action=action class="new-schedule" data-testid="schedule-form">
                <label for="schedule-name">"Name"</label>
                <input id="schedule-name" name="name" required maxlength="100"/>
                <label for="schedule-cron">"Cron (minute hour day month weekday)"</label>
                <input id="schedule-cron" name="cron" required placeholder="0 6 * * 1"/>
                <label for="schedule-timezone">"Time zone"</label>
                <input id="schedule-timezone" name="timezone" value="UTC" required/>
                <label for="schedule-overlap">"While the last job still runs"</label>
                <select id="schedule-overlap" name="overlap">
                    <option value="skip">"skip the slot"</option>
                    <option value="queue">"queue another job"</option>
                </select>
                <label><input type="checkbox" name="catch_up" value="on"/>" After downtime, run the latest missed slot"</label>
                <label for="schedule-task">"Task: a job request in JSON, as POST /api/queue/jobs takes it"</label>
                <textarea id="schedule-task" name="task" rows="6" required>{example}</textarea>
                <button type="submit" data-testid="create-schedule">"Make the schedule"</button>
            </form>
        </section>
    }
}
