//! The REST API under `/api/queue`: thin handlers that authenticate, parse, call the one
//! queue service and shape its answer. Paths and JSON follow the MoonMind queue contract.

mod artifacts;
mod course;
mod extract;
mod integrations;
mod jobs;
mod json;
mod openapi;
mod schedules;
mod stream;
pub(crate) mod worker;

use axum::Router;

use super::error::ApiError;
use super::state::AppState;

/// The API's routes; `max_artifact_bytes` sizes the one route that takes large bodies.
pub fn router(max_artifact_bytes: u64) -> Router<AppState> {
    // Whatever else arrives under /api/queue is answered in the API's shape too, not with
    // the dashboard's 404 page or an empty 405.
    let queue_routes = Router::new()
        .merge(jobs::router())
        .merge(course::router())
        .merge(worker::router())
        .merge(artifacts::router(max_artifact_bytes))
        .merge(schedules::router())
        .merge(stream::router())
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(route_not_found);
    Router::new()
        .nest("/api/queue", queue_routes)
        .merge(integrations::router())
        .merge(openapi::router())
}

async fn route_not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        contract::api::ErrorCode::RouteNotFound,
        format!(
            "no route of the API at {}; GET /api/openapi.json lists them all",
            uri.path()
        ),
    )
}

/// A method a route does not take, answered in the API's shape (the probes and `/metrics`
/// answer with it too).
pub(crate) async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> ApiError {
    ApiError::new(
        contract::api::ErrorCode::MethodNotAllowed,
        format!(
            "{} does not take {method}; GET /api/openapi.json lists its methods",
            uri.path()
        ),
    )
}
