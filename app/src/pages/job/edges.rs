//! The jobs this one waits for (`dependsOn`) and the jobs that wait for it, each linked
//! with the edge's state. Rendered on the server outside the live island, so it costs the
//! browser bundle nothing.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// One edge as the page shows it: the other job, and `waiting`, `met` or `broken`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EdgeView {
    pub job: String,
    pub state: String,
}

#[server]
pub async fn load_edges(id: String) -> Result<(Vec<EdgeView>, Vec<EdgeView>), AppError> {
    use crate::ssr;
    ssr::user()?;
    let queue = ssr::queue()?;
    let id = ssr::job_id(&id)?;
    let edges = queue.job_edges(&id).await.map_err(ssr::refused)?;
    let view = |list: Vec<(contract::JobId, String)>| {
        list.into_iter()
            .map(|(job, state)| EdgeView {
                job: job.to_string(),
                state,
            })
            .collect::<Vec<_>>()
    };
    Ok((view(edges.depends_on), view(edges.needed_by)))
}

fn edge_list(list: Vec<EdgeView>, met: &'static str) -> impl IntoView {
    list.into_iter()
        .map(|edge| {
            let (class, said) = match edge.state.as_str() {
                "met" => ("status succeeded", met),
                "broken" => ("status failed", "did not succeed"),
                _ => ("status queued", "waiting"),
            };
            let short: String = edge.job.chars().take(8).collect();
            view! {
                <li>
                    <a href=format!("/tasks/queue/{}", edge.job) data-testid="edge">{short}</a>
                    " " <span class=class>{said}</span>
                </li>
            }
        })
        .collect_view()
}

/// The "Waits for" card of job `id`, when it waits for others or others wait for it.
#[component]
pub fn EdgesSection(id: String) -> impl IntoView {
    let edges = Resource::new(move || id.clone(), load_edges);
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let (depends_on, needed_by) = edges.await.ok()?;
                if depends_on.is_empty() && needed_by.is_empty() {
                    return None;
                }
                Some(view! {
                    <section class="card" aria-labelledby="edges-title">
                        <h2 id="edges-title">"Waits for"</h2>
                        <dl class="facts">
                            {(!depends_on.is_empty()).then(|| view! {
                                <dt>"This job waits for"</dt>
                                <dd><ul class="edges" data-testid="depends-on">{edge_list(depends_on, "succeeded")}</ul></dd>
                            })}
                            {(!needed_by.is_empty()).then(|| view! {
                                <dt>"Jobs waiting for it"</dt>
                                <dd><ul class="edges" data-testid="needed-by">{edge_list(needed_by, "released")}</ul></dd>
                            })}
                        </dl>
                    </section>
                })
            })}
        </Suspense>
    }
}
