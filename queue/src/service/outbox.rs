//! The webhook outbox, as its posting service (the server's) reads and settles it.

use std::time::Duration;

use super::Queue;
use crate::error::QueueError;
use crate::outbox::{Notice, Settled};

impl Queue {
    /// Takes up to `limit` notifications that are due and leased to no one (or whose
    /// lease ran out: the replica that held it stopped), for `owner`, for `lease`. Each
    /// one's `attempt` counts this try; the try is settled with
    /// [`settle_notification`](Self::settle_notification) under that attempt.
    pub async fn claim_notifications(
        &self,
        owner: &str,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<Notice>, QueueError> {
        let now = self.now();
        let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        Ok(self
            .inner
            .db
            .claim_notices(owner, now, until, i64::from(limit))
            .await?)
    }

    /// What `owner`'s try of `notice` left; `false` when the claim was no longer its own
    /// (its lease ran out and another replica took the notification over), so nothing
    /// was written.
    pub async fn settle_notification(
        &self,
        notice: &Notice,
        owner: &str,
        settled: &Settled,
    ) -> Result<bool, QueueError> {
        Ok(self
            .inner
            .db
            .settle_notice(notice.id, owner, notice.attempt, settled)
            .await?)
    }

    /// Says that `replica` posts webhooks: from now, and for ten minutes after the last
    /// time it says so, every end (and wait for approval) is written to the outbox. A
    /// replica that posts says so again every minute or so; with none listening, no
    /// notification is written and an end pays one empty lookup.
    pub async fn listen_for_notifications(&self, replica: &str) -> Result<(), QueueError> {
        Ok(self.inner.db.listen_notices(replica, self.now()).await?)
    }

    /// How many notifications are still to be posted.
    pub async fn notifications_pending(&self) -> Result<i64, QueueError> {
        Ok(self.inner.db.count_notices().await?)
    }
}
