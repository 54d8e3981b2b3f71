//! Retention: the store does not grow forever. A finished job's log lines go once its
//! step-log artifacts hold them, its events and artifacts after longer (a
//! `job.history_deleted` event stays to say so), and its row only if asked. Shaped like
//! River's job cleaner: a config with defaults, a background loop, a `run_once` that tests
//! call directly; small batches, each its own short transaction.
//!
//! Each chore finds its jobs by walking them in creation order from a cursor the database
//! keeps, and keeps those it passed over before they were due (`store/walks.rs`), so no
//! index of the jobs' ends is written on the queue's hot path. Safe on every replica at
//! once: each job is re-checked under its row lock, and a job another replica got to first
//! is skipped.

use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::JobId;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::QueueError;
use crate::every::every;
use crate::service::Queue;
use crate::store::{Chore, Look, PassedOver, Seen};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    /// How often a pass runs.
    pub interval: Duration,
    /// Rows deleted per statement, and jobs read per query.
    pub batch_size: u32,
    /// A finished job's log lines (`task.step.log`) are deleted this long after it
    /// finished, those of each step whose log artifact is stored. `None`: kept.
    pub logs_after: Option<Duration>,
    /// A finished job's events and artifacts are deleted this long after it finished.
    /// `None`: kept.
    pub history_after: Option<Duration>,
    /// A finished job's row is deleted this long after it finished, its history first if
    /// that is still kept. `None` (the default): rows are kept, so the jobs list still
    /// shows every job.
    pub jobs_after: Option<Duration>,
    /// A walk does not pass a job younger than this, whatever the keep: a job is made with
    /// its id and time a little before its row commits, and replicas' clocks differ a
    /// little, so one younger than this with a smaller id than the newest a walk sees could
    /// still come, behind the walk's cursor. Zero only where nothing else writes.
    pub walk_slack: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            interval: Duration::from_secs(60),
            batch_size: 500,
            logs_after: Some(DAY),
            history_after: Some(30 * DAY),
            jobs_after: None,
            walk_slack: Duration::from_secs(60),
        }
    }
}

/// What one pass deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// The jobs whose log lines were compacted (some may have had none), and how many
    /// lines went.
    pub logs_compacted: Vec<JobId>,
    pub log_lines: u64,
    /// The jobs whose events and artifacts were deleted, and how many of each went.
    pub history_deleted: Vec<JobId>,
    pub events: u64,
    pub artifacts: u64,
    /// The job rows deleted.
    pub jobs_deleted: Vec<JobId>,
}

impl RetentionReport {
    /// Whether the pass deleted nothing.
    pub fn is_empty(&self) -> bool {
        self.log_lines == 0 && self.history_deleted.is_empty() && self.jobs_deleted.is_empty()
    }
}

#[derive(Debug, Clone)]
pub struct Retention {
    queue: Queue,
    config: RetentionConfig,
}

impl Retention {
    pub fn new(queue: Queue, config: RetentionConfig) -> Self {
        Retention { queue, config }
    }

    /// Runs a pass every `interval` until `stop` is cancelled. A failed pass is logged and
    /// tried again at the next tick.
    pub fn start(self, stop: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let report = |report: RetentionReport| {
                if !report.is_empty() {
                    tracing::info!(
                        logs_compacted = report.logs_compacted.len(),
                        log_lines = report.log_lines,
                        history_deleted = report.history_deleted.len(),
                        events = report.events,
                        artifacts = report.artifacts,
                        jobs_deleted = report.jobs_deleted.len(),
                        "retention deleted what finished jobs had kept long enough"
                    );
                }
            };
            let interval = self.config.interval;
            every(interval, stop, "retention", || self.run_once(), report).await;
        })
    }

    /// One pass: log lines, then histories, then rows, each until nothing more is due.
    pub async fn run_once(&self) -> Result<RetentionReport, QueueError> {
        let mut report = RetentionReport::default();
        let now = self.queue.now();
        let before = |keep: Duration| {
            chrono::Duration::from_std(keep)
                .ok()
                .and_then(|keep| now.checked_sub_signed(keep))
                .map_or(DateTime::UNIX_EPOCH, |at| at.max(DateTime::UNIX_EPOCH))
        };
        // A row deleted takes its history with it, so the history goes first.
        let history_after = match (self.config.history_after, self.config.jobs_after) {
            (Some(h), Some(j)) => Some(h.min(j)),
            (h, j) => h.or(j),
        };
        let chores = [
            (Chore::Logs, self.config.logs_after),
            (Chore::History, history_after),
            (Chore::Rows, self.config.jobs_after),
        ];
        for (chore, keep) in chores {
            if let Some(keep) = keep {
                let pass = Pass {
                    chore,
                    before: before(keep),
                    walked_before: before(keep.max(self.config.walk_slack)),
                    recheck_at: now + self.recheck_after(),
                };
                self.look_again(&pass, &mut report).await?;
                self.walk(&pass, &mut report).await?;
            }
        }
        Ok(report)
    }

    /// A job passed over unfinished is looked at again this long after: its end writes
    /// nothing that retention reads (`store/walks.rs`), so it is found by looking.
    fn recheck_after(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.config.interval * RECHECK_PASSES)
            .unwrap_or(chrono::Duration::MAX)
    }

    fn batch(&self) -> usize {
        self.config.batch_size.max(1) as usize
    }

    /// The chore's walk from its cursor: the jobs due are done, those not yet kept pending,
    /// until the jobs are too young to be due (made after the cutoff) or there are no more.
    async fn walk(&self, pass: &Pass, report: &mut RetentionReport) -> Result<(), QueueError> {
        loop {
            let seen = self.queue.walk(pass.chore, self.config.batch_size).await?;
            let full = seen.len() >= self.batch();
            let mut to = None;
            let mut due = Vec::new();
            let mut passed = Vec::new();
            let mut young = false;
            for job in &seen {
                if job.created_at >= pass.walked_before {
                    young = true;
                    break;
                }
                match verdict(pass.chore, job, pass.before) {
                    Verdict::Due => due.push(JobId::from(job.id)),
                    Verdict::Done => {}
                    Verdict::Later(finished_at) => passed.push((job.id, pass.kept(finished_at))),
                }
                to = Some(job.id);
            }
            // Done before the cursor passes them: a pass that stops early walks them again.
            self.settle(pass, &due, report).await?;
            if let Some(to) = to {
                self.queue.walked(pass.chore, to, &passed).await?;
            }
            if young || !full {
                return Ok(());
            }
        }
    }

    /// The chore's pending jobs that may be due now: those that had finished, once their
    /// end is older than the cutoff, and those that had not, when it is time to look again.
    async fn look_again(
        &self,
        pass: &Pass,
        report: &mut RetentionReport,
    ) -> Result<(), QueueError> {
        for finished in [true, false] {
            let mut after = (DateTime::UNIX_EPOCH, uuid::Uuid::nil());
            loop {
                let look = if finished {
                    Look::Finished {
                        before: pass.before,
                        after,
                    }
                } else {
                    Look::Recheck {
                        by: self.queue.now(),
                        after,
                    }
                };
                let pending = self
                    .queue
                    .pending(pass.chore, look, self.config.batch_size)
                    .await?;
                let full = pending.len() >= self.batch();
                let mut due = Vec::new();
                let mut changes = Vec::new();
                for (job, was, seen) in &pending {
                    let key = if finished {
                        was.finished_at
                    } else {
                        was.recheck_at
                    };
                    after = (key.unwrap_or(DateTime::UNIX_EPOCH), *job);
                    match seen.map(|seen| verdict(pass.chore, &seen, pass.before)) {
                        None | Some(Verdict::Done) => changes.push((*job, *was, None)),
                        Some(Verdict::Due) => due.push((*job, *was)),
                        Some(Verdict::Later(finished_at)) => {
                            let kept = pass.kept(finished_at);
                            if kept != *was {
                                changes.push((*job, *was, Some(kept)));
                            }
                        }
                    }
                }
                let ids: Vec<JobId> = due.iter().map(|(job, _)| JobId::from(*job)).collect();
                let done = self.settle(pass, &ids, report).await?;
                changes.extend(
                    due.into_iter()
                        .filter(|(job, _)| done.contains(&JobId::from(*job)))
                        .map(|(job, was)| (job, was, None)),
                );
                self.queue.repend(pass.chore, &changes).await?;
                if !full {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Does the chore's work on the `due` jobs; answers those it was done on (a job
    /// another replica got to first, or queued again meanwhile, is not).
    async fn settle(
        &self,
        pass: &Pass,
        due: &[JobId],
        report: &mut RetentionReport,
    ) -> Result<Vec<JobId>, QueueError> {
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let batch = self.config.batch_size;
        match pass.chore {
            Chore::Logs => {
                let (marked, lines) = self.queue.compact_logs(due, pass.before, batch).await?;
                report.logs_compacted.extend(marked.iter().copied());
                report.log_lines += lines;
                Ok(marked)
            }
            Chore::History => {
                let mut done = Vec::new();
                for id in due {
                    if let Some(deleted) = self.queue.delete_history(id, pass.before, batch).await?
                    {
                        report.history_deleted.push(*id);
                        report.events += deleted.events;
                        report.artifacts += deleted.artifacts;
                        done.push(*id);
                    }
                }
                Ok(done)
            }
            Chore::Rows => {
                let deleted = self.queue.delete_finished_jobs(due, pass.before).await?;
                report.jobs_deleted.extend(deleted.iter().copied());
                Ok(deleted)
            }
        }
    }
}

/// How many pass intervals a chore waits before it looks again at a job it passed over
/// unfinished: with the default interval, an hour.
const RECHECK_PASSES: u32 = 60;

/// One chore's part of a pass.
struct Pass {
    chore: Chore,
    /// Jobs that finished before this are due.
    before: DateTime<Utc>,
    /// The walk stops at the first job made since this (`RetentionConfig::walk_slack`).
    walked_before: DateTime<Utc>,
    /// When a job passed over unfinished is looked at again.
    recheck_at: DateTime<Utc>,
}

impl Pass {
    /// How a job passed over is kept: by its end, or to be looked at again.
    fn kept(&self, finished_at: Option<DateTime<Utc>>) -> PassedOver {
        PassedOver {
            finished_at,
            recheck_at: finished_at.is_none().then_some(self.recheck_at),
        }
    }
}

/// What a chore makes of a job it looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// It has the chore's work to do now.
    Due,
    /// The chore is done with it for good, unless it is queued again.
    Done,
    /// Not yet: it has not finished (`None`) or finished too recently, or (rows) its
    /// history is still kept.
    Later(Option<DateTime<Utc>>),
}

fn verdict(chore: Chore, job: &Seen, before: DateTime<Utc>) -> Verdict {
    let Some(finished) = job.finished_at else {
        return Verdict::Later(None);
    };
    // A mark older than the end it is compared with was for an earlier end.
    let since = |mark: Option<DateTime<Utc>>| mark.is_some_and(|at| at > finished);
    let history_kept = !since(job.history_deleted_at);
    let wanted = match chore {
        Chore::Logs => history_kept && !since(job.logs_compacted_at),
        Chore::History => history_kept,
        Chore::Rows => !history_kept,
    };
    match (wanted, finished < before) {
        (true, true) => Verdict::Due,
        // The history goes first, in its own chore.
        (false, _) if chore == Chore::Rows => Verdict::Later(Some(finished)),
        (false, _) => Verdict::Done,
        (true, false) => Verdict::Later(Some(finished)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_700_000_000_000;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(T + ms).unwrap()
    }

    fn job(finished: Option<i64>, history: Option<i64>, logs: Option<i64>) -> Seen {
        Seen {
            id: uuid::Uuid::nil(),
            created_at: at(0),
            finished_at: finished.map(at),
            history_deleted_at: history.map(at),
            logs_compacted_at: logs.map(at),
        }
    }

    #[test]
    fn a_job_not_finished_is_looked_at_later_by_every_chore() {
        for chore in Chore::ALL {
            assert_eq!(
                verdict(chore, &job(None, None, None), at(100)),
                Verdict::Later(None)
            );
        }
    }

    #[test]
    fn a_finished_job_is_due_once_its_end_is_older_than_the_cutoff() {
        let ended = job(Some(10), None, None);
        assert_eq!(
            verdict(Chore::Logs, &ended, at(10)),
            Verdict::Later(Some(at(10)))
        );
        assert_eq!(verdict(Chore::Logs, &ended, at(11)), Verdict::Due);
        assert_eq!(verdict(Chore::History, &ended, at(11)), Verdict::Due);
        // Rows wait for the history to go.
        assert_eq!(
            verdict(Chore::Rows, &ended, at(11)),
            Verdict::Later(Some(at(10)))
        );
    }

    #[test]
    fn a_chore_done_since_the_job_s_end_is_done_until_it_ends_again() {
        let compacted = job(Some(10), None, Some(20));
        assert_eq!(verdict(Chore::Logs, &compacted, at(30)), Verdict::Done);
        assert_eq!(verdict(Chore::History, &compacted, at(30)), Verdict::Due);
        let gone = job(Some(10), Some(20), None);
        assert_eq!(verdict(Chore::Logs, &gone, at(30)), Verdict::Done);
        assert_eq!(verdict(Chore::History, &gone, at(30)), Verdict::Done);
        assert_eq!(verdict(Chore::Rows, &gone, at(30)), Verdict::Due);
        // Marks made before a later end were for an earlier one.
        let again = job(Some(40), Some(20), Some(20));
        assert_eq!(verdict(Chore::Logs, &again, at(50)), Verdict::Due);
        assert_eq!(verdict(Chore::History, &again, at(50)), Verdict::Due);
        assert_eq!(
            verdict(Chore::Rows, &again, at(50)),
            Verdict::Later(Some(at(40)))
        );
    }
}
