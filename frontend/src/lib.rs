//! The browser entry: hydrates the server-rendered pages of `app`. Nothing else lives here.

// Leptos view types nest deeply; computing their layout needs more than the default 128.
#![recursion_limit = "256"]

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
