//! The live table's vacuum, on PostgreSQL. A claim walks the claim order's index from its
//! first entry, and every job claimed since `job_queue` was last vacuumed left a dead entry
//! there, ahead of the queued ones: each claim's walk grows with the work done since. At a
//! few thousand jobs a second that is thousands of entries a second, where autovacuum
//! looks at a table once a minute at best (and not at all where it is off). So each
//! replica looks every `interval` and vacuums the table once `min_dead` of its row
//! versions are dead. The table holds only live jobs, so a vacuum is short. Shaped like
//! the rescuer; safe on every replica at once (a second vacuum skips the table while one
//! runs). SQLite has nothing to do: it removes a row's index entries with the row.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::QueueError;
use crate::every::every;
use crate::service::Queue;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VacuumConfig {
    /// How often to look at the live table.
    pub interval: Duration,
    /// The dead row versions (two a job: its claim's and its end's) at which to vacuum.
    /// About 170 of the claim order's dead entries fill an index page the claim walks;
    /// a thousand cost each claim a few pages.
    pub min_dead: i64,
}

impl Default for VacuumConfig {
    fn default() -> Self {
        VacuumConfig {
            interval: Duration::from_secs(1),
            min_dead: 1_000,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VacuumReport {
    /// Vacuumed: the table had `dead` dead row versions.
    Vacuumed { dead: i64 },
    /// Left alone: `dead` (none counted on SQLite) is under the threshold.
    Skipped { dead: i64 },
    /// This database user does not own the table, which PostgreSQL requires of whoever
    /// vacuums it; only autovacuum will.
    NotOwner,
}

#[derive(Debug, Clone)]
pub struct Vacuum {
    queue: Queue,
    config: VacuumConfig,
}

impl Vacuum {
    pub fn new(queue: Queue, config: VacuumConfig) -> Self {
        Vacuum { queue, config }
    }

    /// Runs a pass every `interval` until `stop` is cancelled. A table it may not vacuum
    /// is said once, with what to do instead.
    pub fn start(self, stop: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut told = false;
            let report = |report: VacuumReport| match report {
                VacuumReport::Vacuumed { dead } => {
                    tracing::debug!(dead, "vacuumed the live table (job_queue)")
                }
                VacuumReport::NotOwner if !told => {
                    told = true;
                    tracing::warn!(
                        "the live table (job_queue) belongs to another database user, so \
                         this one cannot vacuum it, and claims slow down as jobs pass \
                         through it until autovacuum does; run stepwise as the table's \
                         owner, or set autovacuum_vacuum_threshold = 1000 and \
                         autovacuum_vacuum_scale_factor = 0 on job_queue"
                    )
                }
                _ => {}
            };
            let interval = self.config.interval;
            every(
                interval,
                stop,
                "live table vacuum",
                || self.run_once(),
                report,
            )
            .await;
        })
    }

    /// One pass: a vacuum of the live table if it is at least `min_dead` dead.
    pub async fn run_once(&self) -> Result<VacuumReport, QueueError> {
        let Some(live) = self.queue.live_dead().await? else {
            return Ok(VacuumReport::Skipped { dead: 0 });
        };
        if !live.owned {
            return Ok(VacuumReport::NotOwner);
        }
        if live.dead < self.config.min_dead {
            return Ok(VacuumReport::Skipped { dead: live.dead });
        }
        self.queue.vacuum_live().await?;
        Ok(VacuumReport::Vacuumed { dead: live.dead })
    }
}
