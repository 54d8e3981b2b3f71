//! `/tasks/queue/{id}`: one job. Its header, the step timeline built from the
//! `task.steps.plan` / `task.step.*` events with a tail of the latest step's output, the
//! cancel fields and button, the artifacts and the newest events. The cancel form is a plain
//! form post, so it works without JavaScript. In the browser the page follows the job's
//! event stream: log lines and warnings are added as they arrive, and any other event
//! reloads the page's data, so the timeline advances live.

use contract::events::StepIndex;
use contract::{JobState, StepState};
use leptos::either::EitherOf4;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use serde::Deserialize;

use crate::components::table::Table;
use crate::error::AppError;
use crate::views::{JobView, LogTail, StepView};

#[server(output = crate::codec::Json)]
pub async fn load_job(id: String) -> Result<JobView, AppError> {
    use contract::job::task;

    use crate::ssr;
    /// A timeline this long without its log lines is read no further.
    const MILESTONES_READ: usize = 20_000;
    /// The newest events read for the output box.
    const LATEST_READ: u32 = 200;
    let user = ssr::user()?;
    let queue = ssr::queue()?;
    let id = ssr::job_id(&id)?;
    let mut milestones = Vec::new();
    // Whether every milestone was read (the read stopped short of the cap).
    let complete = loop {
        let after = milestones.last().map_or(0, |e: &contract::JobEvent| e.id);
        let page = queue
            .list_events_except(&id, task::STEP_LOG, after, 1000)
            .await
            .map_err(ssr::refused)?;
        let full = page.len() == 1000;
        milestones.extend(page);
        if !full || milestones.len() >= MILESTONES_READ {
            break !full;
        }
    };
    let latest = queue
        .list_latest_events(&id, LATEST_READ)
        .await
        .map_err(ssr::refused)?;
    if complete {
        crate::format::catch_up_milestones(&mut milestones, &latest);
    }
    // Read after its events, so that the state shown is at least as new as every event
    // up to the page's stream cursor: one that comes later is streamed to the page.
    let job = queue.get_job(&id).await.map_err(ssr::refused)?;
    // The events table lists milestones only: as many as were read.
    let events_total = milestones.len() as u64;
    let artifacts = queue.list_artifacts(&id).await.map_err(ssr::refused)?;
    let workers = queue.list_workers().await.map_err(ssr::refused)?;
    let now = queue.now();
    let waiting = crate::format::waiting(&job, &workers, now);
    let data = crate::format::JobData {
        job: &job,
        milestones: &milestones,
        latest: &latest,
        events_total,
        artifacts: &artifacts,
    };
    let mut view = crate::format::job_view(data, now.timestamp_millis(), waiting);
    view.may_cancel = user.require_operator().is_ok();
    Ok(view)
}

/// Asks the job's worker to stop (or cancels a queued job at once), as the logged-in
/// operator.
#[server]
pub async fn cancel_job(id: String, reason: String) -> Result<(), AppError> {
    use crate::ssr;
    let user = ssr::operator()?;
    let id = ssr::job_id(&id)?;
    let reason = Some(reason.trim().to_string()).filter(|r| !r.is_empty());
    ssr::queue()?
        .request_cancel(&id, Some(&user.name), reason)
        .await
        .map_err(ssr::refused)?;
    Ok(())
}

/// An event that arrived on the live stream after the page's data was read: what the page
/// shows of it (the rest of its JSON is skipped unread).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveEvent {
    pub id: i64,
    pub kind: String,
    pub level: String,
    pub message: String,
    #[serde(default)]
    pub payload: StepIndex,
    pub created_at: String,
}

impl LiveEvent {
    fn step_index(&self) -> Option<usize> {
        self.payload.step_index
    }
}

/// `2026-11-22T11:40:05.123Z` as the page writes an event's time: `2026-11-22 11:40:05 UTC`.
pub fn second_of(rfc3339: &str) -> String {
    match rfc3339.get(..19) {
        Some(seconds) if rfc3339.ends_with('Z') => format!("{} UTC", seconds.replacen('T', " ", 1)),
        _ => rfc3339.to_string(),
    }
}

#[component]
pub fn JobPage() -> impl IntoView {
    let params = use_params_map();
    let job = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        load_job,
    );
    view! {
        <p><a href="/tasks/queue">"← All jobs"</a></p>
        <Suspense fallback=|| view! { <p class="muted">"Loading the job…"</p> }>
            {move || Suspend::new(async move {
                match job.await {
                    // The tab says which job it is: its title, as the heading.
                    Ok(view) => view! {
                        <Title text=view.title.clone()/>
                        <LiveJob initial=view.clone()/>
                        // Server-rendered only; the live job swaps them for the server's
                        // fresh ones when what they show changes (see `live::cards_shape`).
                        <div id=CARDS_ID>
                            <source::SourceSection id=view.id.clone()/>
                            <edges::EdgesSection id=view.id.clone()/>
                            {published_artifact(&view)
                                .map(|artifact| view! { <published::PublishedSection id=view.id.clone() artifact/> })}
                            <course::CourseSection view/>
                        </div>
                    }.into_any(),
                    Err(e) => view! {
                        <Title text="Job"/>
                        <p class="error" role="alert">"Could not load this job: " {e.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The id of the element holding the cards the server alone renders: what the job
/// published, and the operator's forms for its course.
const CARDS_ID: &str = "job-cards";

/// The name in its artifact address of the job's publish result, once it has published.
fn published_artifact(view: &JobView) -> Option<String> {
    view.artifacts
        .iter()
        .find(|a| a.name == contract::job::task::PUBLISH_RESULT)
        .and_then(|a| a.href.rsplit('/').next())
        .map(str::to_string)
}

/// The job, kept up to date in the browser: an island that starts from the data the server
/// rendered, adds log lines and warnings from the job's event stream as they arrive, and
/// reads the job again for any other event and after a cancel. The cancel form is drawn
/// apart, so a reload never throws away a reason being typed.
#[island]
fn LiveJob(initial: JobView) -> impl IntoView {
    let id = initial.id.clone();
    let may_cancel = initial.may_cancel;
    let job = RwSignal::new(initial);
    let live = RwSignal::new(Vec::<LiveEvent>::new());
    let cancel = ServerAction::<CancelJob>::new();
    #[cfg(feature = "hydrate")]
    live::follow(job, live, cancel);
    let state = Memo::new(move |_| job.with(|v| (v.status, v.cancel.is_some())));
    view! {
        {move || job.with(|v| view! { <JobTop view=v.clone() live/> })}
        {move || {
            let (status, requested) = state.get();
            view! { <CancelSection id=id.clone() status requested may_cancel cancel/> }
        }}
        {move || job.with(|v| view! { <JobBottom view=v.clone() live/> })}
    }
}

mod course;
mod edges;
/// The browser side of the live job (see `live.rs`).
#[cfg(feature = "hydrate")]
mod live;
mod published;
mod source;

/// The job's head, facts, notices and step timeline with the output tail.
#[component]
fn JobTop(view: JobView, live: RwSignal<Vec<LiveEvent>>) -> impl IntoView {
    let done = view
        .steps
        .iter()
        .filter(|s| s.state == StepState::Succeeded)
        .count();
    let total = view.steps.len();
    let last_event_id = view.last_event_id;
    let since = view.since;
    let facts = view
        .facts
        .into_iter()
        .map(|(name, value)| {
            let since = since.filter(|_| name == crate::views::DURATION_FACT);
            view! { <dt>{name}</dt><dd data-since=since>{value}</dd> }
        })
        .collect_view();
    let stopping = view.status == JobState::Running && view.cancel.is_some();
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
    let steps = view
        .steps
        .into_iter()
        .map(|step| timeline_row(step, "step"))
        .collect_view();
    let tail = view
        .tail
        .map(|tail| view! { <Tail tail live last_event_id/> });
    let percent = (done * 100).checked_div(total).unwrap_or(0);
    view! {
        <div class="page-head">
            <h1>{view.title}</h1>
            <span class=format!("status {}", view.status.as_str()) data-testid="job-status">
                // Running still, but told to stop: say so until the worker has.
                {if stopping { "stopping" } else { view.status.as_str() }}
            </span>
        </div>
        <section class="card" aria-labelledby="job-facts">
            <h2 id="job-facts" class="visually-hidden">"Job"</h2>
            // A one-line objective is the heading already: no paragraph repeats it.
            {(!view.objective.is_empty()).then(|| view! { <p class="objective">{view.objective}</p> })}
            <dl class="facts">{facts}</dl>
        </section>
        {view.waiting.map(|w| view! {
            <section class="card notice" role="status" aria-labelledby="waiting-title">
                <h2 id="waiting-title">"Waiting to start"</h2>
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
            {(!view.usage.is_empty()).then(|| view! {
                <p class="muted" data-testid="usage-total">"Used in all: " {view.usage.clone()}</p>
            })}
            {view.budget.as_ref().filter(|b| !b.used.is_empty()).map(|b| view! {
                <p class=if b.spent { "notice-text" } else { "muted" } data-testid="budget">
                    "Budget: " {b.used.clone()} {b.spent.then_some(" (spent)")}
                </p>
            })}
            <ol class="stages" aria-label="Stages">
                {view.stages.into_iter().map(|(name, state)| view! {
                    <li class=format!("status {}", state.as_str())>{format!("{name}: {}", state.as_str())}</li>
                }).collect_view()}
            </ol>
            <ol class="timeline">{steps}</ol>
            {tail}
            {(!view.iterations.is_empty()).then(|| view! {
                <h3 id="iterations-title">"Completion check"</h3>
                <ol class="timeline" aria-labelledby="iterations-title" data-testid="iterations">
                    {view.iterations.into_iter().map(|it| timeline_row(it, "iteration")).collect_view()}
                </ol>
            })}
        </section>
    }
}

/// One row of a timeline: a step (`what` = "step"), or an iteration of the completion
/// loop with its check's verdict and the check's output as a log.
fn timeline_row(step: StepView, what: &'static str) -> impl IntoView {
    let state = step.state.as_str();
    let current = step.state == StepState::Running;
    let number = step.number;
    let title = match what {
        "step" => format!("{number}. {}", step.title),
        _ => step.title,
    };
    let (note, note_class) = match (step.verdict.is_empty(), step.passed) {
        (true, _) => (step.skill, "muted"),
        (false, true) => (step.verdict, "verdict passed"),
        (false, false) => (step.verdict, "verdict"),
    };
    let link = move |href: Option<String>, text: &'static str, label: &'static str| {
        href.map(|href| view! { <a href=href aria-label=format!("{label} of {what} {number}")>{text}</a> })
    };
    view! {
        <li class=format!("step-row {state}") aria-current=current.then_some("step")>
            <span class=format!("status {state}")>{state}</span>
            <span class="step-title">{title}</span>
            <span class=note_class>{note}</span>
            <span class="muted" data-since=step.since>{step.duration}</span>
            <span class="muted usage">{step.usage}</span>
            <span class="links">
                {link(step.log, "log", "Log")}
                {link(step.check_log, "check", "Check output")}
                {link(step.patch, "diff", "Diff")}
            </span>
        </li>
    }
}

/// The cancel form (a plain form post without JavaScript), or why there is none.
#[component]
fn CancelSection(
    id: String,
    status: JobState,
    /// A cancel was requested already: the worker is stopping the job.
    requested: bool,
    may_cancel: bool,
    cancel: ServerAction<CancelJob>,
) -> impl IntoView {
    let error = move || {
        cancel.value().get().and_then(Result::err).map(
            |e| view! { <p class="error" role="alert">"The cancel failed: " {e.to_string()}</p> },
        )
    };
    view! {
        <section class="card" aria-labelledby="cancel-form-title">
            <h2 id="cancel-form-title">"Cancel"</h2>
            {if requested && !status.is_terminal() {
                EitherOf4::D(view! {
                    <p class="muted" data-testid="cancel-pending">
                        "The worker is stopping this job."
                    </p>
                })
            } else if !may_cancel {
                EitherOf4::C(view! {
                    <p class="muted" data-testid="cancel-not-allowed">
                        "You are logged in as a viewer: viewers can read jobs but not cancel them."
                    </p>
                })
            } else if status.is_terminal() {
                EitherOf4::B(view! {
                    <p class="muted" id="cancel-ended">
                        {format!("This job has ended ({}): there is nothing left to cancel.", status.as_str())}
                    </p>
                })
            } else {
                // A plain form post to the server function without JavaScript (the server
                // answers with a redirect back here); with it, the action is dispatched.
                let reason = NodeRef::<leptos::html::Input>::new();
                let action = <CancelJob as leptos::server_fn::ServerFn>::url();
                let on_submit = {
                    let id = id.clone();
                    move |ev: leptos::ev::SubmitEvent| {
                        ev.prevent_default();
                        let reason = reason.get().map(|input| input.value()).unwrap_or_default();
                        cancel.dispatch(CancelJob { id: id.clone(), reason });
                    }
                };
                EitherOf4::A(view! {
                    <details>
                        <summary>"Cancel this job…"</summary>
                        <form method="post" action=action on:submit=on_submit>
                            <input type="hidden" name="id" value=id/>
                            <label for="cancel-reason">"Reason (optional)"</label>
                            <input id="cancel-reason" type="text" name="reason" autocomplete="off" node_ref=reason/>
                            <button type="submit" class="danger">"Confirm cancel"</button>
                        </form>
                    </details>
                    {error}
                })
            }}
        </section>
    }
}

/// The job's artifacts and newest events, with the events that arrived since.
#[component]
fn JobBottom(view: JobView, live: RwSignal<Vec<LiveEvent>>) -> impl IntoView {
    let last_event_id = view.last_event_id;
    let artifacts = view
        .artifacts
        .into_iter()
        .map(|a| view! {
            <li>
                <a href=a.href>{a.name.clone()}</a> " "
                <span class="muted">{format!("{} B", a.size)}</span> " "
                <a href=a.download class="muted" aria-label=format!("Download {}", a.name)>"download"</a>
            </li>
        })
        .collect_view();
    let shown = view.events.len() as u64;
    let events_note = (view.events_total > shown).then(|| {
        view! {
            <p class="muted">{format!(
                "The newest {shown} of {} events; the API lists them all: GET /api/queue/jobs/{}/events.",
                view.events_total, view.id
            )}</p>
        }
    });
    let events = view
        .events
        .into_iter()
        .map(|e| view! { <EventRow when=e.when level=e.level kind=e.kind message=e.message/> })
        .collect_view();
    let live_rows = move || {
        live.with(|l| {
            // Log lines go to the output box only, as on the server's render.
            l.iter()
                .filter(|e| e.id > last_event_id && e.kind != contract::job::task::STEP_LOG)
                .map(|e| view! {
                    <EventRow when=second_of(&e.created_at) level=e.level.clone() kind=e.kind.clone() message=e.message.clone()/>
                })
                .collect_view()
        })
    };
    view! {
        <section class="card" aria-labelledby="artifacts-title">
            <h2 id="artifacts-title">"Artifacts"</h2>
            <ul class="artifacts">{artifacts}</ul>
        </section>
        <section class="card" aria-labelledby="events-title">
            <h2 id="events-title">"Events"</h2>
            {events_note}
            <Table class="events" headers=&["When", "Event", "Message"]>{events}{live_rows}</Table>
        </section>
    }
}

#[component]
fn EventRow(when: String, level: String, kind: String, message: String) -> impl IntoView {
    view! {
        <tr class=level>
            <td>{when}</td>
            <td>{kind}</td>
            <td class="message">{message}</td>
        </tr>
    }
}

/// The newest output of one step: what the page was rendered with, then each line as it
/// arrives. The box keeps its scroll at the bottom (CSS `column-reverse`), like a terminal.
#[component]
fn Tail(tail: LogTail, live: RwSignal<Vec<LiveEvent>>, last_event_id: i64) -> impl IntoView {
    let step = tail.step_index;
    let heading = if tail.running {
        format!("Live output of step {}", tail.title)
    } else {
        format!("Last output of step {}", tail.title)
    };
    let text = Memo::new(move |_| {
        let mut lines = tail.lines.clone();
        live.with(|l| {
            for e in l.iter().filter(|e| {
                e.id > last_event_id
                    && e.kind == contract::job::task::STEP_LOG
                    && e.step_index() == Some(step)
            }) {
                lines.extend(e.message.lines().map(str::to_string));
            }
        });
        let cut = lines.len().saturating_sub(500);
        lines[cut..].join("\n")
    });
    view! {
        <section class="tail" aria-labelledby="tail-title">
            <h3 id="tail-title">{heading}</h3>
            <div class="tail-box" tabindex="0" role="log" aria-live="polite" aria-labelledby="tail-title">
                <pre data-testid="log-tail">{move || text.get()}</pre>
            </div>
            {move || text.with(String::is_empty).then(|| view! { <p class="muted">"No output yet."</p> })}
        </section>
    }
}
