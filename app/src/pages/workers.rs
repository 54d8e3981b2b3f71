//! `/tasks/workers`: every worker the server has seen through claims and heartbeats, what
//! it can run, how it boxes its steps, and what it is running now.

use leptos::prelude::*;

use leptos_meta::Title;
use serde::{Deserialize, Serialize};

use crate::components::table::Table;
use crate::error::AppError;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerView {
    pub id: String,
    pub capabilities: Vec<String>,
    pub version: String,
    /// How it boxes its steps, as it said (`bwrap`, `off`); empty when it never said.
    pub sandbox: String,
    pub last_seen: String,
    pub connected: bool,
    pub jobs: Vec<String>,
}

#[server]
pub async fn list_workers() -> Result<Vec<WorkerView>, AppError> {
    use crate::ssr;
    ssr::user()?;
    let queue = ssr::queue()?;
    let now = queue.now();
    let workers = queue.list_workers().await.map_err(ssr::refused)?;
    Ok(workers
        .into_iter()
        .map(|w| WorkerView {
            connected: w.is_live(now),
            last_seen: crate::format::when(&w.last_seen_at),
            version: w.version.unwrap_or_default(),
            sandbox: w.sandbox.unwrap_or_default(),
            id: w.id,
            capabilities: w.capabilities,
            jobs: w.running_jobs.iter().map(ToString::to_string).collect(),
        })
        .collect())
}

#[component]
pub fn WorkersPage() -> impl IntoView {
    let workers = Resource::new(|| (), |_| list_workers());
    view! {
        <Title text="Workers"/>
        <h1>"Workers"</h1>
        <Suspense fallback=|| view! { <p class="muted">"Loading the workers…"</p> }>
            {move || Suspend::new(async move {
                match workers.await {
                    Ok(list) if list.is_empty() => view! {
                        <section class="card empty">
                            <p>"No worker has connected yet. Start `stepwise serve` (it runs one) or "
                               "`stepwise worker --server … --token …` on a machine with the agent CLIs."</p>
                        </section>
                    }.into_any(),
                    Ok(list) => view! { <WorkerTable list/> }.into_any(),
                    Err(e) => view! {
                        <p class="error" role="alert">"Could not load the workers: " {e.to_string()}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn WorkerTable(list: Vec<WorkerView>) -> impl IntoView {
    let rows = list
        .into_iter()
        .map(|w| {
            let (class, state) = if w.connected {
                ("status succeeded", "connected")
            } else {
                ("status queued", "gone")
            };
            let jobs = w
                .jobs
                .into_iter()
                .map(|id| {
                    let href = format!("/tasks/queue/{id}");
                    let short: String = id.chars().take(8).collect();
                    view! { <a href=href>{short}</a> " " }
                })
                .collect_view();
            let sandbox = match w.sandbox.as_str() {
                "" => view! { <span class="muted">"not said"</span> }.into_any(),
                "off" => view! {
                    <span class="status failed" title="Its steps run as the worker's user and can read and write whatever it can">
                        "off: steps unsandboxed"
                    </span>
                }
                .into_any(),
                boxed => view! { <span>{boxed.to_string()}</span> }.into_any(),
            };
            view! {
                <tr>
                    <td>{w.id}</td>
                    <td><span class=class>{state}</span></td>
                    <td>{w.capabilities.join(", ")}</td>
                    <td>{sandbox}</td>
                    <td>{w.version}</td>
                    <td>{w.last_seen}</td>
                    <td>{jobs}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <Table class="workers" headers=&["Worker", "State", "Capabilities", "Sandbox", "Version", "Last seen", "Running"]>
            {rows}
        </Table>
    }
}
