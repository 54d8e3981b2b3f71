//! The browser side of the live job: an EventSource on the job's stream, resuming after the
//! newest event the page was rendered with. Every event is kept in `live`, where the events
//! table and the log tail show it at once; an event that changes the page's data also
//! reads the job again, a few milliseconds after the first of a burst. The browser
//! reconnects a dropped stream by itself, resuming after the last event it saw.

use std::time::Duration;

use leptos::prelude::*;

use super::{CancelJob, JobView, LiveEvent, load_job};
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

pub fn follow(
    job: RwSignal<JobView>,
    live: RwSignal<Vec<LiveEvent>>,
    cancel: ServerAction<CancelJob>,
) {
    let (id, after) = job.with_untracked(|v| (v.id.clone(), v.last_event_id));
    let reload = {
        let id = id.clone();
        move || {
            let id = id.clone();
            leptos::task::spawn_local(async move {
                // A failed read keeps the page as it is; the next event retries.
                if let Ok(fresh) = load_job(id).await {
                    // What the reload brought is in the data now.
                    live.update(|l| l.retain(|e| e.id > fresh.last_event_id));
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
