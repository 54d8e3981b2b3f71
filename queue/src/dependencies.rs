//! The resolver of jobs that wait for others, a background service every replica runs
//! (a config with defaults, `new`, `start(stop)`, a testable `run_once`): see
//! [`Queue::resolve_dependencies`](crate::Queue::resolve_dependencies). It holds no
//! worker slot: a waiting job is a queued row no claim reaches until it is released.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Queue;
use crate::every::every;

#[derive(Debug, Clone)]
pub struct ResolverConfig {
    /// How often a replica looks for waits that are over.
    pub interval: Duration,
}

impl Default for ResolverConfig {
    fn default() -> Self {
        ResolverConfig {
            interval: Duration::from_millis(500),
        }
    }
}

pub struct Resolver {
    queue: Queue,
    config: ResolverConfig,
}

impl Resolver {
    pub fn new(queue: Queue, config: ResolverConfig) -> Resolver {
        Resolver { queue, config }
    }

    pub fn start(self, stop: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let report = |moved: usize| {
                if moved > 0 {
                    tracing::info!(moved, "released or cancelled jobs that waited for others");
                }
            };
            let interval = self.config.interval;
            every(
                interval,
                stop,
                "dependency resolution",
                || self.run_once(),
                report,
            )
            .await;
        })
    }

    /// One pass: how many waiting jobs it released or cancelled.
    pub async fn run_once(&self) -> Result<usize, crate::QueueError> {
        self.queue.resolve_dependencies().await
    }
}
