//! `/login`: trade a user token for a dashboard session. The form posts to the server's
//! `POST /login` as a plain form, so it works before (or without) the wasm bundle; the
//! server answers with an HttpOnly, SameSite=Strict cookie and a redirect.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// What the server's `error` query value means, said so a person knows what to do next.
fn error_message(code: &str) -> &'static str {
    match code {
        "invalid" => {
            "That token is unknown or has been revoked. Check it, or make a new one with `stepwise token create`."
        }
        "worker" => "That is a worker token: workers run jobs but cannot log in. Use a user token.",
        "code" => {
            "That login link was used already or has expired. Restart `stepwise serve` for a new one, or paste a user token."
        }
        "origin" => {
            "The login form was sent from another site, so it was refused. Log in from this page."
        }
        "empty" => "Paste a user token to log in.",
        _ => "Logging in failed. Try again.",
    }
}

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let error = move || query.read().get("error").map(|c| error_message(&c));
    let next = move || query.read().get("next").unwrap_or_default();
    view! {
        <Title text="Log in"/>
        <section class="card narrow" aria-labelledby="login-title">
            <h1 id="login-title">"Log in"</h1>
            <p class="hint">
                "Use a user token. `stepwise serve` prints a one-time login link when it starts, "
                "and `stepwise token create --role operator` makes a token for someone else."
            </p>
            <form method="post" action="/login" class="stack">
                <input type="hidden" name="next" value=next/>
                <label for="login-token">"User token"</label>
                <input
                    id="login-token"
                    name="token"
                    type="password"
                    autocomplete="off"
                    spellcheck="false"
                    required
                    aria-describedby="login-error"
                    aria-invalid=move || error().is_some().to_string()
                />
                <p id="login-error" class="field-error" role="alert">{error}</p>
                <button type="submit" class="primary">"Log in"</button>
            </form>
        </section>
    }
}
