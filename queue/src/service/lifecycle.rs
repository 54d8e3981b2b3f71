//! The guarded transitions of a leased job: heartbeat, complete, fail, cancel and its
//! acknowledgement, and the rescuer's lease expiry.

use std::time::Duration;

use contract::job::events;
use contract::{Job, JobId, JobState};

use super::Queue;
use super::write::Apply;
use crate::error::{QueueError, check_reason, reported};
use crate::lease::{Completion, Fence};
use crate::machine::{self, Outcome};

impl Queue {
    /// Extends the lease; the returned job tells the worker whether a cancel was requested.
    /// A lease that expired but was not yet taken back can still be extended.
    pub async fn heartbeat(
        &self,
        id: &JobId,
        fence: &Fence,
        lease: Duration,
    ) -> Result<Job, QueueError> {
        let lease = chrono::Duration::from_std(lease)
            .ok()
            .filter(|lease| *lease > chrono::Duration::zero())
            .ok_or_else(|| QueueError::invalid("lease", "must be a positive duration"))?;
        self.transition(id, |job, now| {
            let until = now.checked_add_signed(lease).unwrap_or(now);
            machine::heartbeat(job, fence, now, until)
        })
        .await
    }

    /// running → succeeded (even when a cancel was requested too late; see [`JobState`]).
    pub async fn complete(
        &self,
        id: &JobId,
        fence: &Fence,
        summary: Option<String>,
    ) -> Result<Job, QueueError> {
        let summary = summary.map(|s| reported("resultSummary", s)).transpose()?;
        self.transition(id, |job, now| {
            machine::complete(job, fence, now, summary.clone())
        })
        .await
    }

    /// [`complete`](Self::complete) for several jobs in one transaction: for a worker that
    /// finishes jobs in batches. Each completion gets its own answer, in the order given;
    /// one refused (a stale fence, say) does not hold back the others.
    pub async fn complete_many(
        &self,
        completions: Vec<Completion>,
    ) -> Result<Vec<Result<Job, QueueError>>, QueueError> {
        let completions = completions
            .into_iter()
            .map(|done| {
                Ok(Completion {
                    summary: done
                        .summary
                        .map(|s| reported("resultSummary", s))
                        .transpose()?,
                    ..done
                })
            })
            .collect::<Result<Vec<_>, QueueError>>()?;
        let ops = completions
            .iter()
            .map(|done| {
                let apply: Apply<'_> = Box::new(move |job: &mut Job, now| {
                    machine::complete(job, &done.fence, now, done.summary.clone())
                });
                (&done.id, apply)
            })
            .collect();
        self.transition_many(ops).await
    }

    /// running → queued after a backoff (retryable, attempts left), dead_letter (retryable,
    /// none left), failed (not retryable), or cancelled (a cancel was requested).
    pub async fn fail(
        &self,
        id: &JobId,
        fence: &Fence,
        error: String,
        retryable: bool,
    ) -> Result<Job, QueueError> {
        let error = reported("errorMessage", error)?;
        self.transition(id, |job, now| {
            let retry = self.retry_after(job.attempt, now);
            machine::fail(job, fence, now, error.clone(), retryable, retry)
        })
        .await
    }

    /// queued → cancelled at once; running → cancel requested (the worker sees it on its
    /// next heartbeat and acknowledges). Repeats are no-ops returning the job; a job that
    /// finished otherwise answers StateConflict.
    pub async fn request_cancel(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        reason: Option<String>,
    ) -> Result<Job, QueueError> {
        check_reason(reason.as_deref())?;
        self.transition(id, |job, now| {
            machine::request_cancel(job, user_id, reason.clone(), now)
        })
        .await
    }

    /// running with a cancel requested → cancelled, by the worker holding the lease. The
    /// same worker and attempt acknowledging again gets the cancelled job back.
    pub async fn ack_cancel(&self, id: &JobId, fence: &Fence) -> Result<Job, QueueError> {
        let now = self.now();
        let (mut tx, mut job) = self.lock(id).await?;
        let acked_by = if job.status == JobState::Cancelled {
            tx.last_event(id.uuid(), events::JOB_CANCELLED)
                .await?
                .and_then(|event| machine::acknowledged_by(&event.payload))
        } else {
            None
        };
        let outcome = machine::ack_cancel(&mut job, fence, now, acked_by.as_ref())?;
        self.write_outcome(tx, &job, outcome, now).await?;
        Ok(job)
    }

    /// The lease rescuer's transition for one job; `None` if it needed none (the lease was
    /// renewed or the job finished since the rescuer looked).
    pub(crate) async fn expire_lease(&self, id: &JobId) -> Result<Option<Job>, QueueError> {
        // Read first, outside the write: a job paused on the way out keeps its latest
        // checkpoint. An expired lease is rare, so the read costs little; a job gone
        // meanwhile is found missing below.
        let latest = self.attempt_checkpoint(id).await.ok().flatten();
        let now = self.now();
        let mut tx = self.begin().await?;
        let Some(mut job) = tx.lock_job(id.uuid()).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        let retry = self.retry_after(job.attempt, now);
        let outcome = machine::expire_lease(&mut job, now, retry, latest)?;
        if outcome == Outcome::Unchanged {
            tx.rollback().await?;
            return Ok(None);
        }
        self.write_outcome(tx, &job, outcome, now).await?;
        Ok(Some(job))
    }

    pub(crate) async fn expired_leases(&self, limit: i64) -> Result<Vec<JobId>, QueueError> {
        let ids = self.inner.db.expired_leases(self.now(), limit).await?;
        Ok(ids.into_iter().map(JobId::from).collect())
    }
}
