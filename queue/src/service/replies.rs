//! Jobs from GitHub: the job a pull request belongs to, and the replies on the issue as the
//! server's reply service reads and settles them.

use std::time::Duration;

use contract::JobId;

use super::Queue;
use crate::error::QueueError;
use crate::reply::{Replied, Reply};

impl Queue {
    /// The job that opened pull request `pull` (its page), as far as the server read it: a
    /// job that answers an issue, or one whose pull request is watched for feedback.
    pub async fn job_of_pull(&self, pull: &str) -> Result<Option<JobId>, QueueError> {
        Ok(self.inner.db.job_of_pull(pull).await?)
    }

    /// Leases up to `limit` replies that are due and leased to no one (or whose lease ran
    /// out), to `owner` for `lease`; each is settled with
    /// [`settle_reply`](Self::settle_reply) under its attempt.
    pub async fn claim_replies(
        &self,
        owner: &str,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<Reply>, QueueError> {
        let now = self.now();
        let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        Ok(self
            .inner
            .db
            .claim_replies(owner, now, until, i64::from(limit))
            .await?)
    }

    /// What `owner`'s write of `reply` left; `false` when the lease was no longer its own.
    pub async fn settle_reply(
        &self,
        reply: &Reply,
        owner: &str,
        replied: &Replied,
    ) -> Result<bool, QueueError> {
        Ok(self
            .inner
            .db
            .settle_reply(reply, owner, replied, self.now())
            .await?)
    }

    /// Job `id` answers on `issue` anew (a round that a mention there made): a new comment.
    pub async fn reply_on(&self, id: &JobId, issue: &str) -> Result<(), QueueError> {
        Ok(self.inner.db.rearm_reply(id, issue, self.now()).await?)
    }

    /// Job `id`'s reply: its state (`due`, `posted`, `done`) and its comment's id.
    pub async fn reply_state(
        &self,
        id: &JobId,
    ) -> Result<Option<(String, Option<i64>)>, QueueError> {
        Ok(self.inner.db.reply_state(id).await?)
    }
}
