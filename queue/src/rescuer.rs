//! The lease rescuer: takes jobs back from workers that stopped heartbeating (crashed,
//! lost their network, were killed). Shaped like River's rescuer: a config with defaults,
//! a background loop, and a `run_once` that tests call directly.
//!
//! Safe to run on every replica at once: each job is re-checked under its row lock, so a
//! job two rescuers both saw is taken back once, and a lease renewed in the meantime is
//! left alone.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::QueueError;
use crate::every::every;
use crate::service::Queue;
use contract::{JobId, JobState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RescuerConfig {
    /// How often to look for expired leases. A lost worker's job waits at most its lease
    /// plus this before it is requeued.
    pub interval: Duration,
    /// Jobs handled per query; `run_once` keeps going while batches come back full.
    pub batch_size: u32,
}

impl Default for RescuerConfig {
    fn default() -> Self {
        RescuerConfig {
            interval: Duration::from_secs(5),
            batch_size: 100,
        }
    }
}

/// The ids of the jobs one pass took back, by what became of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RescueReport {
    pub requeued: Vec<JobId>,
    pub cancelled: Vec<JobId>,
    /// Paused: a pause had been requested before the lease ran out.
    pub paused: Vec<JobId>,
    pub dead_lettered: Vec<JobId>,
}

impl RescueReport {
    pub fn total(&self) -> usize {
        self.requeued.len() + self.cancelled.len() + self.paused.len() + self.dead_lettered.len()
    }
}

#[derive(Debug, Clone)]
pub struct Rescuer {
    queue: Queue,
    config: RescuerConfig,
}

impl Rescuer {
    pub fn new(queue: Queue, config: RescuerConfig) -> Self {
        Rescuer { queue, config }
    }

    /// Runs a pass every `interval` until `stop` is cancelled. A failed pass is logged and
    /// retried at the next tick: the database may be back by then.
    pub fn start(self, stop: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let report = |report: RescueReport| {
                if report.total() > 0 {
                    tracing::info!(
                        requeued = report.requeued.len(),
                        cancelled = report.cancelled.len(),
                        paused = report.paused.len(),
                        dead_lettered = report.dead_lettered.len(),
                        "rescued jobs with expired leases"
                    );
                }
            };
            let interval = self.config.interval;
            every(interval, stop, "lease rescue", || self.run_once(), report).await;
        })
    }

    /// One pass: every running job whose lease expired before the queue clock's now.
    pub async fn run_once(&self) -> Result<RescueReport, QueueError> {
        let mut report = RescueReport::default();
        let batch = i64::from(self.config.batch_size.max(1));
        loop {
            let ids = self.queue.expired_leases(batch).await?;
            let full = ids.len() as i64 == batch;
            let mut progressed = false;
            for id in ids {
                let Some(job) = self.queue.expire_lease(&id).await? else {
                    continue;
                };
                progressed = true;
                match job.status {
                    JobState::Queued => report.requeued.push(job.id),
                    JobState::Cancelled => report.cancelled.push(job.id),
                    JobState::Paused => report.paused.push(job.id),
                    JobState::DeadLetter => report.dead_lettered.push(job.id),
                    // expire_lease only produces the four states above.
                    _ => {}
                }
            }
            // A full batch where nothing changed means others are handling these rows;
            // stop rather than spin on them.
            if !full || !progressed {
                return Ok(report);
            }
        }
    }
}
