//! The REST API under `/api/queue`: thin handlers that authenticate, parse, call the one
//! queue service and shape its answer. Paths and JSON follow the MoonMind queue contract.

mod artifacts;
mod error;
mod extract;
mod jobs;
mod json;
mod openapi;
mod stream;
mod worker;

use std::time::Duration;

use axum::Router;
use queue::Queue;

pub use error::ApiError;
pub use json::ApiJson;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub queue: Queue,
    pub limits: Limits,
    /// Cancelled when the server stops serving: open event streams end then, so a
    /// graceful shutdown does not wait on a browser tab that is still watching.
    pub closing: tokio_util::sync::CancellationToken,
}

/// Bounds on what a client may ask for.
#[derive(Clone, Debug)]
pub struct Limits {
    pub default_lease: Duration,
    pub max_lease: Duration,
    /// The longest a claim long-poll may wait before answering `{"job": null}`.
    pub max_claim_wait: Duration,
    /// How often an idle SSE stream sends a keep-alive comment.
    pub keep_alive: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default_lease: Duration::from_secs(60),
            max_lease: Duration::from_secs(3600),
            max_claim_wait: Duration::from_secs(30),
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// The API's routes; `max_artifact_bytes` sizes the one route that takes large bodies.
pub fn router(max_artifact_bytes: u64) -> Router<AppState> {
    let queue_routes = Router::new()
        .merge(jobs::router())
        .merge(worker::router())
        .merge(artifacts::router(max_artifact_bytes))
        .merge(stream::router());
    Router::new()
        .nest("/api/queue", queue_routes)
        .merge(openapi::router())
}

#[cfg(test)]
mod tests;
