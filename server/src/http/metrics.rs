//! `GET /metrics`: the Prometheus text exposition of [`crate::metrics`], for any user
//! token (a scraper sends `Authorization: Bearer <token>`; a viewer's is enough); and the
//! middleware that counts each request by its route.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::auth::User;
use super::error::ApiError;
use super::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/metrics", get(metrics))
        .method_not_allowed_fallback(super::api::method_not_allowed)
}

#[utoipa::path(get, path = "/metrics", tag = "metrics",
    responses((status = 200, description = "the metrics in the Prometheus text format", content_type = "text/plain"),
        (status = 401, description = "no valid user token")))]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    _user: User,
) -> Result<Response, ApiError> {
    let counts = state.queue.count_jobs_by_state().await?;
    let outbox = state.queue.notifications_pending().await?;
    let text = state.metrics.encode(&counts, outbox);
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            ),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response())
}

/// Counts a request that reached a route, by method, route pattern and status, and times
/// it to its response's head. A route layer: a request no route matched is not counted.
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    state.metrics.request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}
