//! `GET /healthz` and `GET /readyz`, for load balancers and container orchestrators: the
//! only routes without a token, so they answer whether and why not, and nothing else.
//! `stepwise worker --health-port` answers the same two with its own readiness.

use std::future::Future;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use contract::api::Health;

use super::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .method_not_allowed_fallback(super::api::method_not_allowed)
}

/// The same two routes for a process that is not the server: `ready` says whether it can
/// do its work now.
pub fn probe_router<F, Fut>(ready: F) -> Router
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Health> + Send + 'static,
{
    Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move { answer(ready().await) }
            }),
        )
        .method_not_allowed_fallback(super::api::method_not_allowed)
}

/// Serves [`probe_router`] on `addr` until the process ends; fails only to bind.
pub async fn serve_probes<F, Fut>(addr: std::net::SocketAddr, ready: F) -> std::io::Result<()>
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Health> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "health probes: GET /healthz and /readyz");
    let probes = probe_router(ready);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, probes).await {
            tracing::error!(%error, "the health probes stopped");
        }
    });
    Ok(())
}

/// A probe's answer: the status it acts on, the reason for a person reading it.
pub fn answer(health: Health) -> Response {
    let status = StatusCode::from_u16(health.http_status()).unwrap_or(StatusCode::OK);
    // A probe must see the state now, never a cached one.
    (
        status,
        [(axum::http::header::CACHE_CONTROL, "no-store")],
        Json(health),
    )
        .into_response()
}

#[utoipa::path(get, path = "/healthz", tag = "health", security(()),
    responses((status = 200, description = "the process is up", body = Health)))]
pub(crate) async fn healthz() -> Response {
    answer(Health::ok())
}

#[utoipa::path(get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, description = "the database answers and its schema is the one this build applies", body = Health),
        (status = 503, description = "not ready; `reason` says why and what to do", body = Health)))]
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    if state.closing.is_cancelled() {
        return answer(Health::unavailable("the server is stopping"));
    }
    answer(match state.queue.readiness().await {
        Ok(()) => Health::ok(),
        Err(not_ready) => Health::unavailable(not_ready.to_string()),
    })
}
