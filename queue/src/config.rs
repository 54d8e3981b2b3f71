//! How a [`Queue`](crate::Queue) behaves: clock, retry backoff, artifact storage and limits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use contract::Defaults;

use crate::clock::{Clock, SystemClock};
use crate::observer::Observer;

#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// Fills the fields a submitted task leaves out (see [`contract::normalize()`]).
    pub defaults: Defaults,
    pub clock: Arc<dyn Clock>,
    /// Artifacts live at `{artifacts_dir}/{job_id}/{name}`.
    pub artifacts_dir: PathBuf,
    /// The largest artifact accepted, in bytes.
    pub max_artifact_bytes: u64,
    /// The delay before the first retry; see [`QueueConfig::retry_delay`].
    pub retry_base: Duration,
    /// No retry waits longer than this.
    pub retry_cap: Duration,
    /// How often a waiting `claim_wait` looks again without being woken, so that retry
    /// windows which simply elapse (nobody notifies for those) are noticed.
    pub claim_poll_interval: Duration,
    /// At most this many jobs of one repository run at once, on all workers together: a
    /// claim skips the jobs of a repository at its limit for the next one's. `None`: no
    /// limit (the library's default; `stepwise serve` sets 1, so that two tasks never push
    /// to one repository at once). Repositories are compared as submitted, after
    /// normalization.
    pub max_running_per_repository: Option<u32>,
    /// Told of every event this replica stores (see [`Observer`]), in this order.
    pub observers: Vec<Arc<dyn Observer>>,
}

impl QueueConfig {
    pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 32 * 1024 * 1024;
    pub const DEFAULT_RETRY_BASE: Duration = Duration::from_secs(2);
    pub const DEFAULT_RETRY_CAP: Duration = Duration::from_secs(600);
    pub const DEFAULT_CLAIM_POLL_INTERVAL: Duration = Duration::from_secs(1);

    pub fn new(artifacts_dir: impl Into<PathBuf>) -> Self {
        QueueConfig {
            defaults: Defaults::default(),
            clock: Arc::new(SystemClock),
            artifacts_dir: artifacts_dir.into(),
            max_artifact_bytes: Self::DEFAULT_MAX_ARTIFACT_BYTES,
            retry_base: Self::DEFAULT_RETRY_BASE,
            retry_cap: Self::DEFAULT_RETRY_CAP,
            claim_poll_interval: Self::DEFAULT_CLAIM_POLL_INTERVAL,
            max_running_per_repository: None,
            observers: Vec::new(),
        }
    }

    /// The wait before the next attempt after attempt `attempt` (1-based) failed:
    /// `retry_base × 2^(attempt-1)`, at most `retry_cap`. No jitter: jobs are few and long,
    /// so synchronized retries are not a load problem, and a fixed schedule is predictable.
    pub fn retry_delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(31);
        self.retry_base
            .checked_mul(1u32 << exponent)
            .unwrap_or(self.retry_cap)
            .min(self.retry_cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_from_the_base_up_to_the_cap() {
        let config = QueueConfig::new("/tmp/unused");
        let secs: Vec<u64> = (1..=11).map(|a| config.retry_delay(a).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]);
        assert_eq!(config.retry_delay(0), Duration::from_secs(2));
        assert_eq!(config.retry_delay(u32::MAX), Duration::from_secs(600));
    }
}
