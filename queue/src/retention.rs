//! Retention: the store does not grow forever. A finished job's log lines go once its
//! step-log artifacts hold them, its events and artifacts after longer (a
//! `job.history_deleted` event stays to say so), and its row only if asked. Shaped like
//! River's job cleaner: a config with defaults, a background loop, a `run_once` that tests
//! call directly; small batches, each its own short transaction.
//!
//! Safe on every replica at once: each job is re-checked under its row lock, and a job
//! another replica got to first is skipped.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::JobId;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::QueueError;
use crate::every::every;
use crate::service::Queue;
use crate::store::Due;

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
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            interval: Duration::from_secs(60),
            batch_size: 500,
            logs_after: Some(DAY),
            history_after: Some(30 * DAY),
            jobs_after: None,
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
    /// Every job finished before this has had its log lines compacted, so a pass starts
    /// there rather than walking a month of compacted jobs. Unknown at start: the first
    /// pass walks them once.
    logs_done_before: Arc<Mutex<Option<DateTime<Utc>>>>,
}

/// Replicas' clocks differ a little: a job another replica finished just now may carry a
/// time a little before this one's watermark.
const WATERMARK_SLACK: Duration = Duration::from_secs(60);

impl Retention {
    pub fn new(queue: Queue, config: RetentionConfig) -> Self {
        Retention {
            queue,
            config,
            logs_done_before: Arc::default(),
        }
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
        if let Some(keep) = self.config.logs_after {
            self.compact_logs(before(keep), &mut report).await?;
        }
        // A row deleted takes its history with it, so the history goes first.
        let history_after = match (self.config.history_after, self.config.jobs_after) {
            (Some(h), Some(j)) => Some(h.min(j)),
            (h, j) => h.or(j),
        };
        if let Some(keep) = history_after {
            self.delete_history(before(keep), &mut report).await?;
        }
        if let Some(keep) = self.config.jobs_after {
            loop {
                let ids = self
                    .queue
                    .delete_finished_jobs(before(keep), self.config.batch_size)
                    .await?;
                let full = ids.len() >= self.config.batch_size.max(1) as usize;
                report.jobs_deleted.extend(ids);
                if !full {
                    break;
                }
            }
        }
        Ok(report)
    }

    async fn compact_logs(
        &self,
        before: DateTime<Utc>,
        report: &mut RetentionReport,
    ) -> Result<(), QueueError> {
        let mut watermark = self.logs_done_before.lock().await;
        let start = watermark.map_or(DateTime::UNIX_EPOCH, |at| at - WATERMARK_SLACK);
        let mut after = (start, uuid::Uuid::nil());
        loop {
            let due = self
                .queue
                .jobs_due(Due::Logs { after }, before, self.config.batch_size)
                .await?;
            let full = due.len() >= self.config.batch_size.max(1) as usize;
            let Some(&(last, at)) = due.last() else {
                break;
            };
            after = (at, last.uuid());
            let ids: Vec<JobId> = due.into_iter().map(|(id, _)| id).collect();
            let (marked, lines) = self
                .queue
                .compact_logs(&ids, before, self.config.batch_size)
                .await?;
            report.logs_compacted.extend(marked);
            report.log_lines += lines;
            if !full {
                break;
            }
        }
        // Everything finished before the cutoff is done.
        *watermark = Some(before);
        Ok(())
    }

    async fn delete_history(
        &self,
        before: DateTime<Utc>,
        report: &mut RetentionReport,
    ) -> Result<(), QueueError> {
        loop {
            let due = self
                .queue
                .jobs_due(Due::History, before, self.config.batch_size)
                .await?;
            let full = due.len() >= self.config.batch_size.max(1) as usize;
            let mut progressed = false;
            for (id, _) in due {
                if let Some(deleted) = self
                    .queue
                    .delete_history(&id, before, self.config.batch_size)
                    .await?
                {
                    progressed = true;
                    report.history_deleted.push(id);
                    report.events += deleted.events;
                    report.artifacts += deleted.artifacts;
                }
            }
            // A full batch where nothing was due any more means another replica is on
            // these jobs; stop rather than spin on them.
            if !full || !progressed {
                return Ok(());
            }
        }
    }
}
