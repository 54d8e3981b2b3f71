//! The browser side shared by the live pages: an event stream followed for as long as the
//! island lives, and reloads that a burst of events shares.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::select_all;
use gloo_net::eventsource::futures::EventSource;
use leptos::prelude::*;

/// Opens an EventSource on `url` and hands `on_message` the data of every event of the
/// named `kinds` (SSE events named by kind reach only listeners of that name). The stream
/// closes when the calling island goes away; the browser reconnects a dropped one by
/// itself, resuming after the last event it saw.
pub(crate) fn follow<'a>(
    url: &str,
    kinds: impl IntoIterator<Item = &'a str>,
    mut on_message: impl FnMut(String) + 'static,
) {
    let Ok(mut source) = EventSource::new(url) else {
        return;
    };
    let subscriptions: Vec<_> = kinds
        .into_iter()
        .filter_map(|kind| source.subscribe(kind).ok())
        .collect();
    // One queue per kind, merged. The browser dispatches each event in a task of its own,
    // and the reader below runs in the microtasks right after it, so the events are still
    // read one at a time, in the order they came.
    let mut events = select_all(subscriptions);
    // The island's owner holds the source: disposing of the owner drops it, and dropping
    // it closes the stream. Nothing else may hold it, since every copy closes it on drop.
    StoredValue::new_local(source);
    leptos::task::spawn_local(async move {
        // gloo-net yields an error only once the stream is closed for good (the browser
        // gave up, or the owner dropped it), never while the browser reconnects, so an
        // error ends the reading just as the raw stream fell silent.
        while let Some(Ok((_, message))) = events.next().await {
            if let Some(data) = message.data().as_string() {
                on_message(data);
            }
        }
    });
}

/// `run`, made to run once `after` the first call of a burst: later calls before it runs
/// are absorbed by it.
pub(crate) fn coalesced(after: Duration, run: impl Fn() + Clone + 'static) -> impl Fn() + Clone {
    let queued = StoredValue::new(false);
    move || {
        if queued.get_value() {
            return;
        }
        queued.set_value(true);
        let run = run.clone();
        set_timeout(
            move || {
                queued.set_value(false);
                run();
            },
            after,
        );
    }
}
