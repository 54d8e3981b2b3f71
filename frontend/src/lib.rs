//! The browser entry: hydrates the server-rendered pages of `app`. Nothing else lives here.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
