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
    /// GitHub's webhook deliveries, when the server takes them (`--github-webhook-secret`).
    pub github: Option<Arc<GitHubHook>>,
}

/// What `POST /api/integrations/github` checks a delivery with, and whom it wakes.
pub struct GitHubHook {
    secret: String,
    /// This replica's pull request feedback service, woken when a delivery is taken.
    pub wake: Arc<tokio::sync::Notify>,
    /// What makes jobs of deliveries, when the server has rules (`--github-rules`).
    pub intake: Option<Arc<crate::github::intake::Intake>>,
}

impl GitHubHook {
    pub fn new(secret: String, wake: Arc<tokio::sync::Notify>) -> GitHubHook {
        GitHubHook {
            secret,
            wake,
            intake: None,
        }
    }

    /// The hook that also makes jobs of deliveries by `intake`'s rules.
    pub fn with_intake(mut self, intake: Option<Arc<crate::github::intake::Intake>>) -> GitHubHook {
        self.intake = intake;
        self
    }

    /// `signed` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under the secret; compared in
    /// constant time.
    pub fn verifies(&self, signed: &str, body: &[u8]) -> bool {
        use hmac::{Hmac, Mac};
        let Some(hex_digest) = signed.strip_prefix("sha256=") else {
            return false;
        };
        let Ok(digest) = hex::decode(hex_digest) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(self.secret.as_bytes()) else {
            return false;
        };
        mac.update(body);
        mac.verify_slice(&digest).is_ok()
    }
}

impl std::fmt::Debug for GitHubHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GitHubHook([REDACTED])")
    }
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
