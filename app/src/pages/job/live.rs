//! The browser side of the live job: an EventSource on the job's stream, resuming after the
//! newest event the page was rendered with. Every event is kept in `live`, where the events
//! table and the log tail show it at once; an event that changes the page's data also
//! reads the job again, a few milliseconds after the first of a burst. When that read
//! changes what the server-rendered cards show (the job ended, paused, published), the page
//! fetches itself and swaps in their fresh markup: no reload, and no wasm for the cards.
//! The browser reconnects a dropped stream by itself, resuming after the last event it saw.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use leptos::prelude::*;

use contract::JobState;

use super::{CARDS_ID, CancelJob, JobView, LiveEvent, load_job};
use crate::stream;

/// How long after an event the page reloads: the events a worker sends together (a
/// step's end, the next step's start) share one reload. Log lines never reload, so
/// this can be short.
const RELOAD_AFTER: Duration = Duration::from_millis(15);

/// Live events a page keeps at most; older ones are in the next reload.
const LIVE_KEPT: usize = 2000;

/// Does an event of this kind change what the page's data shows (the job's state, a
/// step, a stage)? Log lines and warnings do not: they are added as they come.
fn needs_reload(kind: &str) -> bool {
    use contract::job::task;
    kind != task::STEP_LOG && kind != task::WARNING
}

/// What the server-rendered cards depend on: the job's state, as the course card tells
/// states apart (a queued and a running job take the same forms), and whether it has
/// published. When it changes, the live job fetches the cards anew.
fn cards_shape(view: &JobView) -> (Option<JobState>, bool) {
    let state = match view.status {
        JobState::Queued | JobState::Running => None,
        other => Some(other),
    };
    // Whether, not where: `published_artifact` would bring its address parsing into the
    // bundle for nothing.
    let published = view
        .artifacts
        .iter()
        .any(|a| a.name == contract::job::task::PUBLISH_RESULT);
    (state, published)
}

// The page as the server renders it now, read with the session's cookie, and the element
// `id` of it put in place of this page's: plain markup (no island inside), escaped by the
// server like the rest of the page. A failed read keeps the cards as they are.
#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function swap_fresh(id) {
  fetch(location.href, { credentials: "same-origin", headers: { accept: "text/html" } })
    .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
    .then((html) => {
      const fresh = new DOMParser().parseFromString(html, "text/html").getElementById(id);
      const here = document.getElementById(id);
      if (fresh && here) here.replaceWith(document.importNode(fresh, true));
    })
    .catch(() => {});
}
"#)]
extern "C" {
    fn swap_fresh(id: &str);
}

pub fn follow(
    job: RwSignal<JobView>,
    live: RwSignal<Vec<LiveEvent>>,
    cancel: ServerAction<CancelJob>,
) {
    let (id, after) = job.with_untracked(|v| (v.id.clone(), v.last_event_id));
    // What the cards on the page were rendered from.
    let shown = Rc::new(Cell::new(job.with_untracked(cards_shape)));
    let reload = {
        let id = id.clone();
        move || {
            let id = id.clone();
            let shown = shown.clone();
            leptos::task::spawn_local(async move {
                // A failed read keeps the page as it is; the next event retries.
                if let Ok(fresh) = load_job(id).await {
                    // What the reload brought is in the data now.
                    live.update(|l| l.retain(|e| e.id > fresh.last_event_id));
                    let shape = cards_shape(&fresh);
                    if shown.replace(shape) != shape {
                        swap_fresh(CARDS_ID);
                    }
                    job.set(fresh);
                }
            });
        }
    };
    // A cancel's answer changes the job: read it again once the action is done.
    Effect::new({
        let reload = reload.clone();
        move |previous: Option<usize>| {
            let version = cancel.version().get();
            if previous.is_some_and(|p| p != version) {
                reload();
            }
            version
        }
    });
    let reload_soon = stream::coalesced(RELOAD_AFTER, reload);
    let on_event = move |data: String| {
        let Ok(event) = serde_json::from_str::<LiveEvent>(&data) else {
            return;
        };
        let wanted = needs_reload(&event.kind);
        live.update(|l| {
            if l.last().is_none_or(|last| last.id < event.id) {
                l.push(event);
            }
            let cut = l.len().saturating_sub(LIVE_KEPT);
            l.drain(..cut);
        });
        if wanted {
            reload_soon();
        }
    };
    let kinds = contract::job::events::ALL
        .iter()
        .chain(contract::job::task::ALL.iter())
        .copied();
    stream::follow(
        &format!("/api/queue/jobs/{id}/events/stream?after={after}"),
        kinds,
        on_event,
    );
}
