//! The pull request watches, as the server's feedback service reads and settles them, and
//! the word it leaves on a job that needs a person.

use std::time::Duration;

use contract::events::NeedsAttention;
use contract::{Job, JobId};

use super::Queue;
use crate::error::QueueError;
use crate::machine;
use crate::watch::{Looked, Watch};

impl Queue {
    /// Leases up to `limit` watches that are due and leased to no one (or whose lease ran
    /// out), to `owner` for `lease`; each is settled with
    /// [`settle_watch`](Self::settle_watch) under its attempt.
    pub async fn claim_watches(
        &self,
        owner: &str,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<Watch>, QueueError> {
        let now = self.now();
        let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        Ok(self
            .inner
            .db
            .claim_watches(owner, now, until, i64::from(limit))
            .await?)
    }

    /// What `owner`'s look at `watch` left; `false` when the lease was no longer its own,
    /// so nothing was written.
    pub async fn settle_watch(
        &self,
        watch: &Watch,
        owner: &str,
        looked: &Looked,
    ) -> Result<bool, QueueError> {
        Ok(self
            .inner
            .db
            .settle_watch(watch, owner, looked, self.now())
            .await?)
    }

    /// GitHub said pull request `pull` changed: its watches look now. How many there were.
    pub async fn nudge_pull(&self, pull: &str) -> Result<u64, QueueError> {
        Ok(self.inner.db.nudge_watches(pull, self.now()).await?)
    }

    /// The state of job `id`'s watch (`watching`, `needs_attention`, `closed`), if any.
    pub async fn watch_state(&self, id: &JobId) -> Result<Option<String>, QueueError> {
        Ok(self.inner.db.watch_state(id).await?)
    }

    /// Which of `ids` need a person: their pull request's feedback waits for one.
    pub async fn needing_attention(
        &self,
        ids: &[JobId],
    ) -> Result<std::collections::HashSet<JobId>, QueueError> {
        Ok(self
            .inner
            .db
            .needing_attention(ids)
            .await?
            .into_iter()
            .collect())
    }

    /// Ends `owner`'s `watch` asking for a person, and says so on the job
    /// (`job.needs_attention`, posted to the webhooks too). Said once: `None` when the
    /// lease was no longer this look's.
    pub async fn needs_attention(
        &self,
        watch: &Watch,
        owner: &str,
        asked: &NeedsAttention,
    ) -> Result<Option<Job>, QueueError> {
        if !self
            .settle_watch(watch, owner, &Looked::NeedsAttention)
            .await?
        {
            return Ok(None);
        }
        let now = self.now();
        let (tx, mut locked) = self.lock(&watch.job_id).await?;
        let outcome = machine::needs_attention(&mut locked, asked, now);
        self.write_outcome(tx, &locked, outcome, now).await?;
        Ok(Some(locked))
    }
}
