//! The browser entry: hydrates the islands of the server-rendered pages of `app` (the
//! interactive parts; the rest stays plain HTML). Nothing else lives here.

// Leptos view types nest deeply; computing their layout needs more than the default 128.
#![recursion_limit = "256"]

// Linked for its islands, which register themselves with the page's hydration script.
extern crate app;

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    // Panic messages in the console while developing; a release bundle does without.
    #[cfg(debug_assertions)]
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
