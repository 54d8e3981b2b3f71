use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found"/>
        <section class="card">
            <h1>"Page not found"</h1>
            <p>"There is nothing at this address. " <a href="/tasks/queue">"Go to the queue"</a> "."</p>
        </section>
    }
}
