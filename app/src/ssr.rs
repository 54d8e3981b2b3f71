//! What the server functions need from the server: the queue service, and who is asking
//! (the session's user token, which the server's login gate put on the request).

use leptos::prelude::*;
use queue::{Queue, QueueError, Role, TokenRecord};

pub fn queue() -> Result<Queue, ServerFnError> {
    use_context::<Queue>()
        .ok_or_else(|| ServerFnError::new("the queue is missing from the context"))
}

/// The logged-in user's token.
pub fn user() -> Result<TokenRecord, ServerFnError> {
    use_context::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<TokenRecord>().cloned())
        .ok_or_else(|| ServerFnError::new("log in first: this needs a dashboard session"))
}

/// The logged-in user, when they may submit and cancel (admin or operator).
pub fn operator() -> Result<TokenRecord, ServerFnError> {
    let user = user()?;
    match user.role {
        Some(Role::Admin | Role::Operator) => Ok(user),
        _ => Err(ServerFnError::new(
            "viewers can read jobs but not submit or cancel them",
        )),
    }
}

/// A queue error as the page shows it: what the user can act on, said; the rest (a
/// database or disk failure) logged in full and answered without details.
/// The queue's own `code()` says which errors are internal, as it does for the REST API.
pub fn shown(error: QueueError) -> ServerFnError {
    if error.code() == "internal" {
        leptos::logging::error!("dashboard request failed: {error}");
        return ServerFnError::new("the server failed; see its log");
    }
    ServerFnError::new(error.to_string())
}
