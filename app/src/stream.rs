//! The browser side shared by the live pages: an event stream followed for as long as the
//! island lives, and reloads that a burst of events shares.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures_util::StreamExt;
use gloo_net::eventsource::futures::EventSource;
use leptos::prelude::*;

/// Opens an EventSource on `url` and hands `on_message` the data of every event of the
/// named `kinds` (SSE events named by kind reach only listeners of that name). The stream
/// closes when the calling island goes away; the browser reconnects a dropped one by
/// itself, resuming after the last event it saw.
pub(crate) fn follow<'a>(
    url: &str,
    kinds: impl IntoIterator<Item = &'a str>,
    on_message: impl FnMut(String) + 'static,
) {
    let Ok(mut source) = EventSource::new(url) else {
        return;
    };
    let on_message = Rc::new(RefCell::new(on_message));
    // A reader per kind rather than one over the merged subscriptions: merging them
    // (`select_all`) cost the bundle about 2 KiB gzip. The order holds all the same: the
    // browser dispatches each event in a task of its own, and its reader runs in the
    // microtasks right after it, before the next event.
    for kind in kinds {
        let Ok(mut events) = source.subscribe(kind) else {
            continue;
        };
        let on_message = on_message.clone();
        leptos::task::spawn_local(async move {
            // gloo-net yields an error only once the stream is closed for good (the
            // browser gave up, or the owner dropped it), never while the browser
            // reconnects, so an error ends the reading just as the raw stream fell silent.
            while let Some(Ok((_, message))) = events.next().await {
                if let Some(data) = message.data().as_string() {
                    (on_message.borrow_mut())(data);
                }
            }
        });
    }
    // The island's owner holds the source: disposing of the owner drops it, and dropping
    // it closes the stream and ends the readers. Nothing else may hold it, since every
    // copy closes the stream on drop.
    StoredValue::new_local(source);
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
