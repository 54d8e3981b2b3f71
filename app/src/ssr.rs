//! What the server functions need from the server: the queue service, and who is asking
//! (the session's user token, which the server's login gate put on the request). Their
//! errors are [`AppError`]s with the REST API's codes, and so its statuses.

use contract::JobId;
use contract::api::ErrorCode;
use leptos::prelude::*;
use queue::{Queue, QueueError, TokenRecord};

use crate::error::AppError;

pub fn queue() -> Result<Queue, AppError> {
    use_context::<Queue>().ok_or_else(|| internal("the queue is missing from the context"))
}

/// The logged-in user's token.
pub fn user() -> Result<TokenRecord, AppError> {
    use_context::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<TokenRecord>().cloned())
        .ok_or_else(|| {
            refusal(
                ErrorCode::AuthFailed,
                "log in first: this needs a dashboard session",
            )
        })
}

/// The logged-in user, when they may submit and cancel (admin or operator).
pub fn operator() -> Result<TokenRecord, AppError> {
    let user = user()?;
    user.require_operator().map_err(refused)?;
    Ok(user)
}

/// A job id argument, parsed: text that is not one is a job that does not exist (404), as
/// REST answers it.
pub fn job_id(text: &str) -> Result<JobId, AppError> {
    text.parse().map_err(|e| refused(QueueError::from(e)))
}

/// Arguments that do not read (not JSON, say): 400, as REST answers it.
pub fn unreadable(message: impl Into<String>) -> AppError {
    refusal(ErrorCode::InvalidRequest, message)
}

/// An argument that reads but is not valid, naming it: 422, as REST answers it.
pub fn invalid(path: &str, message: &str) -> AppError {
    refused(QueueError::Invalid(vec![contract::FieldError::new(
        path, message,
    )]))
}

/// The server failing: logged in full, answered without details.
pub fn internal(cause: impl std::fmt::Display) -> AppError {
    leptos::logging::error!("dashboard request failed: {cause}");
    refusal(ErrorCode::InternalError, "the server failed; see its log")
}

/// A queue error as the page shows it: what the user can act on, said; the rest (a
/// database or disk failure) logged in full and answered without details.
pub fn refused(error: QueueError) -> AppError {
    let code = error.code();
    if code.is_internal() {
        return internal(error);
    }
    match error {
        QueueError::Invalid(errors) => {
            set_status(code);
            AppError(contract::api::ErrorBody::invalid(errors))
        }
        error => refusal(code, error.to_string()),
    }
}

fn refusal(code: ErrorCode, message: impl Into<String>) -> AppError {
    set_status(code);
    AppError::new(code, message)
}

/// Gives the page being rendered the status of its error (a job that does not exist is a
/// 404 page). A server function called on its own gets its status from its error's code
/// on the way out instead, because a form posted without JavaScript must keep the
/// redirect back to its page that leptos answers it with.
fn set_status(code: ErrorCode) {
    let rendering_page = use_context::<http::request::Parts>()
        .is_some_and(|parts| !parts.uri.path().starts_with(crate::SERVER_FN_PREFIX));
    if !rendering_page {
        return;
    }
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        let status = http::StatusCode::from_u16(code.status())
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        response.set_status(status);
    }
}
