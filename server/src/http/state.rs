//! What every handler can reach, and the bounds on what a client may ask for.

use std::sync::Arc;
use std::time::Duration;

use queue::Queue;

use crate::metrics::Metrics;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub queue: Queue,
    pub limits: Limits,
    /// Cancelled when the server stops serving: open event streams end then, so a
    /// graceful shutdown does not wait on a browser tab that is still watching.
    pub closing: tokio_util::sync::CancellationToken,
    /// What `/metrics` answers; the queue reports to it too when the server wired it as the
    /// queue's observer.
    pub metrics: Arc<Metrics>,
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
