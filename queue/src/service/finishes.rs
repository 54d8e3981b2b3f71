//! A worker's completion and its next claim in one call (issue 39, step 3): a worker that
//! takes its next job as it hands in the last pays one round trip and, on PostgreSQL, one
//! commit for both.

use contract::{Job, JobId};

use super::Queue;
use super::claims::{claim_lease, claim_sql};
use crate::error::{QueueError, reported};
use crate::lease::{ClaimRequest, Fence};
use crate::machine;
use crate::store::Swap;

impl Queue {
    /// Completes job `id` as [`complete`](Self::complete) does, then leases up to `limit`
    /// jobs as [`claim_many`](Self::claim_many) does for `request`; answers the completed
    /// job and those leased, in claim order. Both are checked before anything is written,
    /// and a refused completion claims nothing.
    ///
    /// On PostgreSQL the two are one statement, shared with every other worker's that came
    /// at the same time (`store/postgres/finishes.rs`): one commit, one WAL flush.
    /// When the completion must take the row lock instead (its row changed under it), or
    /// the claim keeps to a repository limit (whose claims take turns), the claim follows
    /// the completion on its own, as it does on SQLite, whose single writer already shares
    /// commits.
    pub async fn complete_and_claim(
        &self,
        id: &JobId,
        fence: &Fence,
        summary: Option<String>,
        request: &ClaimRequest,
        limit: u32,
    ) -> Result<(Job, Vec<Job>), QueueError> {
        let summary = summary.map(|s| reported("resultSummary", s)).transpose()?;
        let lease = claim_lease(request, limit)?;
        if self.repository_limit(request).is_some() {
            let job = self.complete(id, fence, summary).await?;
            return Ok((job, self.claim_many(request, limit).await?));
        }
        let allowed_repositories = request.repository_keys();
        let apply = |job: &mut Job, now| machine::complete(job, fence, now, summary.clone());
        let write = |swap: Swap| {
            let allowed = allowed_repositories.as_deref();
            let claim = claim_sql(request, allowed, swap.now, lease, limit);
            async move {
                let (written, claimed) = self.inner.db.finish(swap, &claim).await?;
                Ok(written.map(|ids| (ids, claimed)))
            }
        };
        let (job, claimed) = self.transition_with(id, apply, write).await?;
        let next = match claimed {
            Some(claimed) => self.leased(claimed),
            None => self.claim_many(request, limit).await?,
        };
        Ok((job, next))
    }
}
