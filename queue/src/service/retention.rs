//! What retention does to finished jobs, a batch of rows per short transaction: a
//! history with the job's row locked, log lines and rows by statements that check the rows
//! they change again, so a job retried in between (no longer finished) is left alone.
//! [`crate::Retention`] decides which jobs and when.

use chrono::{DateTime, Utc};
use contract::JobId;
use contract::events::HistoryDeleted;
use contract::job::events;
use uuid::Uuid;

use super::Queue;
use crate::error::QueueError;
use crate::machine::PendingEvent;
use crate::store::{Chore, Look, PassedOver, Seen};

impl Queue {
    /// Up to `limit` jobs after `chore`'s cursor, in id order.
    pub(crate) async fn walk(&self, chore: Chore, limit: u32) -> Result<Vec<Seen>, QueueError> {
        let (_, seen) = self.inner.db.walk(chore, i64::from(limit.max(1))).await?;
        Ok(seen)
    }

    /// `chore` walked on to `to`, keeping `passed` to look at again.
    pub(crate) async fn walked(
        &self,
        chore: Chore,
        to: Uuid,
        passed: &[(Uuid, PassedOver)],
    ) -> Result<(), QueueError> {
        let mut tx = self.begin().await?;
        tx.walked(chore, to, passed).await?;
        self.commit(tx).await
    }

    /// Up to `limit` of `chore`'s pending jobs that `look` asks for, each as kept and as
    /// it is now (`None`: its row is gone).
    pub(crate) async fn pending(
        &self,
        chore: Chore,
        look: Look,
        limit: u32,
    ) -> Result<Vec<(Uuid, PassedOver, Option<Seen>)>, QueueError> {
        Ok(self
            .inner
            .db
            .pending(chore, look, i64::from(limit.max(1)))
            .await?)
    }

    /// `chore`'s pending jobs, each read as it was kept, no longer pending (`None`) or
    /// kept anew; one left alone if it changed since it was read.
    pub(crate) async fn repend(
        &self,
        chore: Chore,
        changes: &[(Uuid, PassedOver, Option<PassedOver>)],
    ) -> Result<(), QueueError> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        for (job, was, now) in changes {
            tx.repend(chore, *job, *was, *now).await?;
        }
        self.commit(tx).await
    }

    /// Deletes the job's artifacts, then its events, `batch` rows a transaction, and
    /// records `job.history_deleted` as its one event. `None` when the job is not due
    /// (retried since, or another replica got there first).
    pub(crate) async fn delete_history(
        &self,
        id: &JobId,
        before: DateTime<Utc>,
        batch: u32,
    ) -> Result<Option<HistoryDeleted>, QueueError> {
        let batch = i64::from(batch.max(1));
        let mut artifacts = 0;
        let mut removed = 0;
        loop {
            let (mut tx, _job) = self.lock(id).await?;
            if !tx.history_due(id.uuid(), before).await? {
                tx.rollback().await?;
                return Ok(None);
            }
            let n = tx.delete_artifacts(id.uuid(), batch).await?;
            let m = if n < batch as u64 {
                tx.delete_events(id.uuid(), batch).await?
            } else {
                0
            };
            self.commit(tx).await?;
            artifacts += n;
            removed += m;
            if n < batch as u64 && m < batch as u64 {
                break;
            }
        }
        let now = self.now();
        let (mut tx, job) = self.lock(id).await?;
        if !tx.history_due(id.uuid(), before).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        // SQLite keeps the bytes as files, whose rows are gone now. Removed with the row
        // locked, as an upload stores its file, so a job retried meanwhile loses none of
        // its new attempt's; and before the mark, so a pass that stops here finds the job
        // due again and ends it.
        let dir = crate::artifacts::path_of(&self.inner.config.artifacts_dir, id, "");
        if let Err(e) = tokio::fs::remove_dir_all(&dir).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tx.rollback().await?;
            return Err(e.into());
        }
        let Some(finished_at) = tx.mark_history_deleted(id.uuid(), now, before).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        let deleted = HistoryDeleted {
            finished_at,
            events: removed,
            artifacts,
        };
        let event = PendingEvent::new(
            events::JOB_HISTORY_DELETED,
            contract::EventLevel::Info,
            format!(
                "retention deleted this job's {removed} events and {artifacts} artifacts, \
                 kept until {}",
                before.format("%Y-%m-%d %H:%M UTC")
            ),
            &deleted,
        );
        tx.insert_event(id, &event, now).await?;
        self.commit(tx).await?;
        self.observe(&job, [(event.kind.as_str(), &event.payload)]);
        Ok(Some(deleted))
    }

    /// Deletes the log lines of the `jobs` that their step-log artifacts hold, `batch` a
    /// transaction, and marks them compacted (a job whose lines could not go, a step's
    /// log never stored, keeps them until its history goes). Answers the jobs marked, those
    /// still finished before `before`, and how many lines went.
    pub(crate) async fn compact_logs(
        &self,
        jobs: &[JobId],
        before: DateTime<Utc>,
        batch: u32,
    ) -> Result<(Vec<JobId>, u64), QueueError> {
        let ids: Vec<_> = jobs.iter().map(JobId::uuid).collect();
        let batch = i64::from(batch.max(1));
        let mut removed = 0;
        loop {
            let mut tx = self.begin().await?;
            let n = tx.delete_log_lines(&ids, before, batch).await?;
            removed += n;
            // The last batch marks the jobs in the same transaction: one for most passes.
            if n < batch as u64 {
                let marked = tx.mark_logs_compacted(&ids, self.now(), before).await?;
                self.commit(tx).await?;
                return Ok((marked.into_iter().map(JobId::from).collect(), removed));
            }
            self.commit(tx).await?;
        }
    }

    /// Deletes the rows of the `jobs` finished before `before` whose history retention has
    /// already deleted; answers those deleted.
    pub(crate) async fn delete_finished_jobs(
        &self,
        jobs: &[JobId],
        before: DateTime<Utc>,
    ) -> Result<Vec<JobId>, QueueError> {
        let ids: Vec<_> = jobs.iter().map(JobId::uuid).collect();
        let mut tx = self.begin().await?;
        let deleted = tx.delete_job_rows(&ids, before).await?;
        self.commit(tx).await?;
        Ok(deleted.into_iter().map(JobId::from).collect())
    }
}
