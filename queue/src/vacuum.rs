//! The live table's vacuum, on PostgreSQL. A claim walks the claim order's index from its
//! first entry, and every job claimed since `job_queue` was last vacuumed left a dead entry
//! there, ahead of the queued ones: each claim's walk grows with the work done since. At a
//! few thousand jobs a second that is thousands of entries a second, where autovacuum
//! looks at a table once a minute at best (and not at all where it is off). So each
//! replica looks every `interval` and vacuums the table once `min_dead` more of its row
//! versions are dead than the last vacuum left. The table holds only live jobs, so a
//! vacuum is short. Shaped like the rescuer; safe on every replica at once (one vacuums at
//! a time, the others skip). SQLite has nothing to do: it removes a row's index entries
//! with the row.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
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
    /// The dead row versions since the last vacuum at which to vacuum again (two a job,
    /// its claim's and its end's, and one a heartbeat). About 170 of the claim order's dead
    /// entries fill an index page the claim walks, so a thousand cost each claim a few
    /// pages. Not scaled with the table: a vacuum's cost grows with the queued jobs, but
    /// so does every claim's walk until it runs, and claims come by the thousand.
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
    /// Left alone: too few died since the last vacuum (`dead`, none counted on SQLite),
    /// or another replica is vacuuming it.
    Skipped { dead: i64 },
    /// This database user does not own the table, which PostgreSQL requires of whoever
    /// vacuums it; only autovacuum will.
    NotOwner,
}

#[derive(Debug, Clone)]
pub struct Vacuum {
    queue: Queue,
    config: VacuumConfig,
    /// The dead row versions the last vacuum could not remove (an older transaction could
    /// still see them): not counted again, or a long transaction would have every pass
    /// vacuum for nothing.
    left: Arc<AtomicI64>,
}

impl Vacuum {
    pub fn new(queue: Queue, config: VacuumConfig) -> Self {
        Vacuum {
            queue,
            config,
            left: Arc::new(AtomicI64::new(0)),
        }
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
                         through it until autovacuum does: run stepwise as the user that \
                         ran its migrations, or grant that user's role to this one"
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

    /// One pass: a vacuum of the live table if at least `min_dead` of it died since the
    /// last one.
    pub async fn run_once(&self) -> Result<VacuumReport, QueueError> {
        let Some(live) = self.queue.live_dead().await? else {
            return Ok(VacuumReport::Skipped { dead: 0 });
        };
        if !live.owned {
            return Ok(VacuumReport::NotOwner);
        }
        // Fewer dead than the last vacuum left: another replica's vacuum ran since.
        let left = self
            .left
            .fetch_min(live.dead, Ordering::Relaxed)
            .min(live.dead);
        if !due(live.dead, left, self.config.min_dead) || !self.queue.vacuum_live().await? {
            return Ok(VacuumReport::Skipped { dead: live.dead });
        }
        // A vacuum counts what it leaves at once.
        let after = self.queue.live_dead().await?.map_or(0, |l| l.dead);
        self.left.store(after, Ordering::Relaxed);
        Ok(VacuumReport::Vacuumed { dead: live.dead })
    }
}

/// Whether `dead` row versions, of which the last vacuum left `left`, call for a vacuum.
fn due(dead: i64, left: i64, min_dead: i64) -> bool {
    dead.saturating_sub(left) >= min_dead
}

#[cfg(test)]
mod tests {
    use super::due;

    #[test]
    fn a_vacuum_is_due_for_what_died_since_the_last_not_for_what_it_left() {
        assert!(due(1_000, 0, 1_000));
        assert!(!due(999, 0, 1_000));
        // A long transaction kept 5,000 from the last vacuum: only new ones count.
        assert!(!due(5_500, 5_000, 1_000));
        assert!(due(6_000, 5_000, 1_000));
        assert!(due(0, 0, 0));
    }
}
