//! `/tasks/queue`: the jobs, newest first, with a status filter and keyset pagination. The
//! filter and the pages are plain links and a GET form, so they work without JavaScript.
//! In the browser the list follows the jobs stream (`/api/queue/jobs/stream`) and reads
//! itself again when a job changes or a step of one ends, so states and `2/3` move live.

use contract::JobState;
use leptos::either::Either;
use leptos::prelude::*;

use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::components::table::Table;
use crate::error::AppError;
use crate::views::JobList;

#[server(output = crate::codec::Json)]
pub async fn list_jobs(status: Option<String>, after: Option<String>) -> Result<JobList, AppError> {
    use crate::ssr;
    ssr::user()?;
    let status = match status.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => Some(
            s.parse::<JobState>()
                .map_err(|_| ssr::invalid("status", "unknown status"))?,
        ),
        None => None,
    };
    let filter = queue::JobFilter {
        status,
        job_type: None,
        limit: Some(50),
        after: after.filter(|a| !a.is_empty()),
    };
    let queue = ssr::queue()?;
    let page = queue.list_jobs(&filter).await.map_err(ssr::refused)?;
    let workers = queue.list_workers().await.map_err(ssr::refused)?;
    let now = queue.now();
    let ids: Vec<contract::JobId> = page.jobs.iter().map(|j| j.id).collect();
    let done = queue.steps_finished(&ids).await.map_err(ssr::refused)?;
    let attention = queue.needing_attention(&ids).await.map_err(ssr::refused)?;
    let row = |job: &contract::Job| {
        let waiting = crate::format::waiting(job, &workers, now);
        let steps_done = done.get(&job.id).copied().unwrap_or(0);
        crate::views::JobRow {
            needs_attention: attention.contains(&job.id),
            ..crate::format::row(job, now.timestamp_millis(), waiting, steps_done)
        }
    };
    Ok(JobList {
        jobs: page.jobs.iter().map(row).collect(),
        next_cursor: page.next_cursor,
    })
}

#[component]
pub fn QueuePage() -> impl IntoView {
    let query = use_query_map();
    let status = move || query.read().get("status").unwrap_or_default();
    let filter = move || (query.read().get("status"), query.read().get("after"));
    let jobs = Resource::new(filter, |(status, after)| list_jobs(status, after));
    view! {
        <Title text="Queue"/>
        <div class="page-head">
            <h1>"Task queue"</h1>
            <a class="button" href="/tasks/queue/new">"New task"</a>
        </div>
        <form method="get" action="/tasks/queue" class="filters" aria-label="Filter jobs">
            <label for="status-filter">"Status"</label>
            <select id="status-filter" name="status">
                <option value="" selected=move || status().is_empty()>"All"</option>
                {JobState::ALL
                    .iter()
                    .map(|s| {
                        let value = s.as_str();
                        view! { <option value=value selected=move || status() == value>{value}</option> }
                    })
                    .collect_view()}
            </select>
            <button type="submit" class="secondary">"Filter"</button>
        </form>
        <Suspense fallback=|| view! { <p class="muted">"Loading jobs…"</p> }>
            {move || Suspend::new(async move {
                let (status, after) = filter();
                match jobs.await {
                    Ok(list) => view! { <LiveJobs list status after/> }.into_any(),
                    Err(e) => view! {
                        <p class="error" role="alert">"Could not load the jobs: " {e.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The table, kept up to date in the browser: an island that starts from the rows the
/// server rendered and reads them again when the jobs stream says something changed.
#[island]
fn LiveJobs(list: JobList, status: Option<String>, after: Option<String>) -> impl IntoView {
    let list = RwSignal::new(list);
    #[cfg(feature = "hydrate")]
    live::follow(list, status.clone(), after);
    #[cfg(not(feature = "hydrate"))]
    let _ = after;
    let status = status.unwrap_or_default();
    move || list.with(|l| view! { <JobTable list=l.clone() status=status.clone()/> })
}

/// The browser side of the live list: one EventSource on the jobs stream; a change reads
/// the list again, once per burst of changes (a job's claim, its steps, its end).
#[cfg(feature = "hydrate")]
mod live {
    use std::time::Duration;

    use leptos::prelude::*;

    use super::{JobList, list_jobs};
    use crate::stream;

    /// Changes closer together than this share one reload.
    const RELOAD_AFTER: Duration = Duration::from_millis(100);

    pub fn follow(list: RwSignal<JobList>, status: Option<String>, after: Option<String>) {
        let reload = stream::coalesced(RELOAD_AFTER, move || {
            let (status, after) = (status.clone(), after.clone());
            leptos::task::spawn_local(async move {
                // A failed read keeps the rows on screen; the next change retries.
                if let Ok(fresh) = list_jobs(status, after).await {
                    list.set(fresh);
                }
            });
        });
        stream::follow("/api/queue/jobs/stream", ["job", "resync"], move |_| {
            reload()
        });
    }
}

#[component]
fn JobTable(list: JobList, status: String) -> impl IntoView {
    if list.jobs.is_empty() {
        return Either::Left(view! {
            <section class="card empty">
                <p>"No jobs here yet. " <a href="/tasks/queue/new">"Submit a task"</a> "."</p>
            </section>
        });
    }
    let next = list.next_cursor.map(|cursor| {
        let mut href = format!("/tasks/queue?after={cursor}");
        if !status.is_empty() {
            href.push_str(&format!("&status={status}"));
        }
        view! { <a class="more" href=href>"Older jobs"</a> }
    });
    let rows = list
        .jobs
        .into_iter()
        .map(|job| {
            let href = format!("/tasks/queue/{}", job.id);
            let steps = format!("{}/{}", job.steps_done, job.steps);
            let steps_label = format!("{} of {} steps done", job.steps_done, job.steps);
            view! {
                <tr>
                    <td>
                        <span class=format!("status {}", job.status.as_str())>{job.status.as_str()}</span>
                        {job.needs_attention.then(|| view! {
                            <span class="status attention" data-testid="needs-attention">"needs attention"</span>
                        })}
                    </td>
                    <td class="title">
                        <a href=href>{job.title}</a>
                        {job.waiting.map(|w| view! { <p class="waiting">{w}</p> })}
                    </td>
                    <td>{job.repository}</td>
                    <td>{job.runtime}</td>
                    <td><span aria-label=steps_label>{steps}</span></td>
                    <td>{job.created}</td>
                    <td data-since=job.since>{job.duration}</td>
                    <td class="usage">{job.usage}</td>
                </tr>
            }
        })
        .collect_view();
    Either::Right(view! {
        <Table class="jobs" headers=&["Status", "Task", "Repository", "Runtime", "Steps", "Created", "Duration", "Usage"]>
            {rows}
        </Table>
        {next}
    })
}
