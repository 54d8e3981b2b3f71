//! The browser side shared by the live pages: an event stream followed for as long as the
//! island lives, and reloads that a burst of events shares.

use std::time::Duration;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{EventSource, MessageEvent};

/// Opens an EventSource on `url` and hands `on_message` every event of the named `kinds`
/// (SSE events named by kind reach only listeners of that name). The stream closes when
/// the calling island goes away; the browser reconnects a dropped one by itself, resuming
/// after the last event it saw.
pub(crate) fn follow<'a>(
    url: &str,
    kinds: impl IntoIterator<Item = &'a str>,
    on_message: impl FnMut(MessageEvent) + 'static,
) {
    let Ok(stream) = EventSource::new(url) else {
        return;
    };
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(on_message);
    for kind in kinds {
        let _ = stream.add_event_listener_with_callback(kind, on_message.as_ref().unchecked_ref());
    }
    // The stream holds the listener for the rest of the page's life.
    on_message.forget();
    let source = StoredValue::new_local(stream);
    on_cleanup(move || {
        if let Some(stream) = source.try_get_value() {
            stream.close();
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
