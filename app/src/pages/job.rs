//! `/tasks/queue/{id}`: one job. Its header, the step timeline built from the
//! `task.steps.plan` / `task.step.*` events, the cancel fields and button, the artifacts and
//! the events. The cancel form is a plain form post, so it works without JavaScript. In the
//! browser the page follows the job's event stream and reloads its data when something
//! happens, so the timeline advances live.

use contract::JobState;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: String,
    pub status: JobState,
    pub title: String,
    pub objective: String,
    pub facts: Vec<(String, String)>,
    pub steps: Vec<StepView>,
    /// prepare, execute and publish, each with its state (pending, running, succeeded,
    /// failed, skipped or cancelled).
    pub stages: Vec<(String, String)>,
    /// Why a queued job waits with no worker able to run it.
    pub waiting: Option<String>,
    pub cancel: Option<CancelView>,
    pub artifacts: Vec<ArtifactView>,
    pub events: Vec<EventView>,
    /// The newest event's id: the live stream resumes after it.
    pub last_event_id: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    pub number: usize,
    pub title: String,
    pub skill: String,
    /// pending, running, succeeded, failed or cancelled.
    pub state: String,
    pub duration: String,
    pub log: Option<String>,
    pub patch: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancelView {
    pub requested: String,
    pub by: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArtifactView {
    pub name: String,
    pub size: u64,
    pub href: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    pub when: String,
    pub level: String,
    pub kind: String,
    pub message: String,
}

#[server]
pub async fn load_job(id: String) -> Result<JobView, ServerFnError> {
    use crate::ssr;
    ssr::user()?;
    let queue = ssr::queue()?;
    let job = queue.get_job(&id).await.map_err(ssr::shown)?;
    let events = queue.list_events(&id, 0, 1000).await.map_err(ssr::shown)?;
    let artifacts = queue.list_artifacts(&id).await.map_err(ssr::shown)?;
    let workers = queue.list_workers().await.map_err(ssr::shown)?;
    let now = queue.now();
    let waiting = crate::format::waiting(&job, &workers, now);
    Ok(crate::format::job_view(
        &job,
        &events,
        &artifacts,
        now.timestamp_millis(),
        waiting,
    ))
}

/// Asks the job's worker to stop (or cancels a queued job at once), as the logged-in
/// operator.
#[server]
pub async fn cancel_job(id: String, reason: String) -> Result<(), ServerFnError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let reason = Some(reason.trim().to_string()).filter(|r| !r.is_empty());
    ssr::queue()?
        .request_cancel(&id, Some(&user.name), reason)
        .await
        .map_err(ssr::shown)?;
    Ok(())
}

#[component]
pub fn JobPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let cancel = ServerAction::<CancelJob>::new();
    let job = Resource::new(
        move || (id(), cancel.version().get()),
        |(id, _)| load_job(id),
    );
    #[cfg(feature = "hydrate")]
    live::follow(job);
    view! {
        <Title text="Job"/>
        <p><a href="/tasks/queue">"← All jobs"</a></p>
        // Transition, not Suspense: a live reload keeps the page on screen until the new
        // data is there.
        <Transition fallback=|| view! { <p class="muted">"Loading the job…"</p> }>
            {move || Suspend::new(async move {
                match job.await {
                    Ok(view) => view! { <JobDetails view cancel/> }.into_any(),
                    Err(e) => view! {
                        <p class="error" role="alert">"Could not load this job: " {e.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The browser side of the live page: an EventSource on the job's stream, opened once the
/// first data is in (to resume after its newest event), that reloads the job's data when
/// events arrive, a few dozen milliseconds after the first of a burst. The browser reconnects a dropped stream by
/// itself, resuming after the last event it saw.
#[cfg(feature = "hydrate")]
mod live {
    use std::time::Duration;

    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::EventSource;

    use super::JobView;

    /// How long after an event the page reloads: events that come closer together share
    /// one reload, so a chatty agent (whose lines arrive batched) costs at most this many
    /// reloads a second, not one per event. Short enough that an event shows within 100 ms.
    const RELOAD_AFTER_MS: u64 = 40;

    pub fn follow(job: Resource<Result<JobView, ServerFnError>>) {
        let source = StoredValue::new_local(None::<EventSource>);
        let reload_queued = StoredValue::new(false);
        Effect::new(move |_| {
            let Some(Ok(view)) = job.get() else { return };
            if source.with_value(Option::is_some) {
                return;
            }
            let url = format!(
                "/api/queue/jobs/{}/events/stream?after={}",
                view.id, view.last_event_id
            );
            let Ok(stream) = EventSource::new(&url) else {
                return;
            };
            let on_event = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
                if reload_queued.get_value() {
                    return;
                }
                reload_queued.set_value(true);
                set_timeout(
                    move || {
                        reload_queued.set_value(false);
                        job.refetch();
                    },
                    Duration::from_millis(RELOAD_AFTER_MS),
                );
            });
            // Events are named by their kind, so each kind needs its own listener.
            let kinds = contract::job::events::ALL
                .iter()
                .chain(contract::job::task::ALL.iter());
            for kind in kinds {
                let _ = stream
                    .add_event_listener_with_callback(kind, on_event.as_ref().unchecked_ref());
            }
            on_event.forget();
            source.set_value(Some(stream));
        });
        on_cleanup(move || {
            if let Some(stream) = source.try_with_value(|s| s.clone()).flatten() {
                stream.close();
            }
        });
    }
}

#[component]
fn JobDetails(view: JobView, cancel: ServerAction<CancelJob>) -> impl IntoView {
    let done = view.steps.iter().filter(|s| s.state == "succeeded").count();
    let total = view.steps.len();
    let facts = view
        .facts
        .into_iter()
        .map(|(name, value)| view! { <dt>{name}</dt><dd>{value}</dd> })
        .collect_view();
    let cancel_facts = view.cancel.map(|c| {
        view! {
            <section class="card notice" aria-labelledby="cancel-title">
                <h2 id="cancel-title">
                    {if view.status == JobState::Running { "Cancellation requested" } else { "Cancellation" }}
                </h2>
                <dl class="facts">
                    <dt>"Requested"</dt><dd>{c.requested}</dd>
                    <dt>"By"</dt><dd>{c.by}</dd>
                    <dt>"Reason"</dt><dd>{c.reason}</dd>
                </dl>
            </section>
        }
    });
    let cancellable = !view.status.is_terminal();
    let error = move || {
        cancel.value().get().and_then(Result::err).map(
            |e| view! { <p class="error" role="alert">"The cancel failed: " {e.to_string()}</p> },
        )
    };
    let steps = view
        .steps
        .into_iter()
        .map(|step| {
            let current = step.state == "running";
            view! {
                <li class=format!("step-row {}", step.state) aria-current=current.then_some("step")>
                    <span class=format!("status {}", step.state)>{step.state.clone()}</span>
                    <span class="step-title">{format!("{}. {}", step.number, step.title)}</span>
                    <span class="muted">{step.skill}</span>
                    <span class="muted">{step.duration}</span>
                    <span class="links">
                        {step.log.map(|href| view! { <a href=href>"log"</a> })}
                        {step.patch.map(|href| view! { <a href=href>"patch"</a> })}
                    </span>
                </li>
            }
        })
        .collect_view();
    let artifacts = view
        .artifacts
        .into_iter()
        .map(|a| view! { <li><a href=a.href>{a.name}</a> <span class="muted">{format!("{} B", a.size)}</span></li> })
        .collect_view();
    let events = view
        .events
        .into_iter()
        .map(|e| {
            view! {
                <tr class=e.level.clone()>
                    <td>{e.when}</td>
                    <td>{e.kind}</td>
                    <td class="message">{e.message}</td>
                </tr>
            }
        })
        .collect_view();
    let percent = (done * 100).checked_div(total).unwrap_or(0);
    view! {
        <div class="page-head">
            <h1>{view.title}</h1>
            <span class=format!("status {}", view.status.as_str()) data-testid="job-status">{view.status.as_str()}</span>
        </div>
        <section class="card" aria-labelledby="job-facts">
            <h2 id="job-facts" class="visually-hidden">"Job"</h2>
            <p class="objective">{view.objective}</p>
            <dl class="facts">{facts}</dl>
        </section>
        {view.waiting.map(|w| view! {
            <section class="card notice" role="status" aria-labelledby="waiting-title">
                <h2 id="waiting-title">"Waiting for a worker"</h2>
                <p data-testid="waiting">"Nothing can run this job yet: " {w} ". "
                    <a href="/tasks/workers">"See the workers"</a></p>
            </section>
        })}
        {cancel_facts}
        <section class="card" aria-labelledby="steps-title">
            <h2 id="steps-title">"Steps"</h2>
            <div class="progress" role="progressbar" aria-valuemin="0" aria-valuemax=total aria-valuenow=done
                aria-label="Steps done">
                <div class="bar" style=format!("width: {percent}%")></div>
            </div>
            <p class="muted">{format!("{done}/{total} steps done")}</p>
            <ol class="stages" aria-label="Stages">
                {view.stages.into_iter().map(|(name, state)| view! {
                    <li class=format!("status {state}")>{format!("{name}: {state}")}</li>
                }).collect_view()}
            </ol>
            <ol class="timeline">{steps}</ol>
        </section>
        {cancellable.then(|| view! {
            <section class="card" aria-labelledby="cancel-form-title">
                <h2 id="cancel-form-title">"Cancel"</h2>
                <details>
                    <summary>"Cancel this job…"</summary>
                    <ActionForm action=cancel>
                        <input type="hidden" name="id" value=view.id.clone()/>
                        <label for="cancel-reason">"Reason (optional)"</label>
                        <input id="cancel-reason" type="text" name="reason" autocomplete="off"/>
                        <button type="submit" class="danger">"Confirm cancel"</button>
                    </ActionForm>
                </details>
                {error}
            </section>
        })}
        <section class="card" aria-labelledby="artifacts-title">
            <h2 id="artifacts-title">"Artifacts"</h2>
            <ul class="artifacts">{artifacts}</ul>
        </section>
        <section class="card" aria-labelledby="events-title">
            <h2 id="events-title">"Events"</h2>
            <div class="table-wrap">
                <table class="events">
                    <thead><tr><th scope="col">"When"</th><th scope="col">"Event"</th><th scope="col">"Message"</th></tr></thead>
                    <tbody>{events}</tbody>
                </table>
            </div>
        </section>
    }
}
