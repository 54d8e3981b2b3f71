//! Bulk rows for `stepwise bench scale` (the `seed` feature): see `store::seed`.

use contract::{JobId, JobState};
use uuid::Uuid;

use super::Queue;
use crate::error::QueueError;

impl Queue {
    /// Copies the job `template` as `n` new jobs with `status`, in one statement, and
    /// answers their ids, oldest first. The copies are as the template was, but for their
    /// id and status: for a list to page through, not a history to replay.
    pub async fn seed_copies(
        &self,
        template: &JobId,
        n: usize,
        status: JobState,
    ) -> Result<Vec<JobId>, QueueError> {
        let ids: Vec<Uuid> = (0..n).map(|_| Uuid::now_v7()).collect();
        let mut tx = self.begin().await?;
        tx.copy_job(template.uuid(), &ids, status.as_str()).await?;
        tx.commit().await?;
        Ok(ids.into_iter().map(JobId::from).collect())
    }

    /// Appends `n` log lines of step `step` to the job in one statement, notifying no one.
    pub async fn seed_log_lines(&self, id: &JobId, step: usize, n: u32) -> Result<(), QueueError> {
        let payload = serde_json::to_value(contract::events::StepLog { step_index: step })
            .map_err(|e| QueueError::invalid("payload", e.to_string()))?;
        let mut tx = self.begin().await?;
        tx.repeat_event(
            id.uuid(),
            contract::job::task::STEP_LOG,
            payload,
            self.now(),
            i64::from(n),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The bytes the database takes (see `Database::size_bytes`).
    pub async fn database_size(&self) -> Result<u64, QueueError> {
        self.inner.db.size_bytes().await
    }

    /// Where PostgreSQL's WAL is: bytes from its start (two positions subtract to the WAL
    /// written between them, server-wide) and the position as `pg_lsn` text, for
    /// `pg_waldump`; `None` on SQLite.
    pub async fn wal_position(&self) -> Result<Option<(i64, String)>, QueueError> {
        self.inner.db.wal_position().await
    }

    /// PostgreSQL's WAL flushes so far, server-wide (`pg_stat_wal.wal_sync`), as far as its
    /// processes have reported them; `None` on SQLite.
    pub async fn wal_flushes(&self) -> Result<Option<i64>, QueueError> {
        self.inner.db.wal_flushes().await
    }
}
