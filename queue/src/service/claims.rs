//! Leasing jobs to workers: at once, in batches, by long-poll, or handed to a parked
//! claimer in the write that creates the job.

use std::sync::Arc;
use std::time::Duration;

use contract::{Job, JobEvent};
use tokio::time::Instant;

use super::Queue;
use crate::error::QueueError;
use crate::lease::{ClaimRequest, Fence, MAX_CLAIM_BATCH};
use crate::machine::{self, Retry};
use crate::notify::{Notification, NotificationKind};
use crate::store::ClaimSql;

impl Queue {
    /// The fence of the lease `worker_id` holds on job `id` now: for a worker that sends
    /// no attempt with its writes. A job it does not hold answers OwnershipMismatch, one
    /// that has ended StateConflict.
    pub async fn held_fence(
        &self,
        id: &contract::JobId,
        worker_id: &str,
    ) -> Result<Fence, QueueError> {
        let job = self.get_job(id).await?;
        machine::held_fence(&job, worker_id)
    }

    /// Leases the best job this worker may run, if any: queued, due, not cancelled, its
    /// required capabilities a subset of the worker's, its type and repository allowed;
    /// highest priority first, then oldest.
    pub async fn claim(&self, request: &ClaimRequest) -> Result<Option<Job>, QueueError> {
        Ok(self.claim_many(request, 1).await?.into_iter().next())
    }

    /// [`claim`](Self::claim) for up to `limit` jobs (1 to [`MAX_CLAIM_BATCH`]) in one
    /// transaction, in claim order: for a worker that runs jobs in batches.
    pub async fn claim_many(
        &self,
        request: &ClaimRequest,
        limit: u32,
    ) -> Result<Vec<Job>, QueueError> {
        let lease = claim_lease(request, limit)?;
        let repository_limit = self.repository_limit(request);
        let _turn = match repository_limit {
            Some(_) => Some(self.inner.claim_turn.lock().await),
            None => None,
        };
        let now = self.now();
        let allowed_repositories = request.repository_keys();
        let claimed = self
            .inner
            .db
            .claim_jobs(&ClaimSql {
                repository_limit,
                ..claim_sql(request, allowed_repositories.as_deref(), now, lease, limit)
            })
            .await?;
        Ok(self.leased(claimed))
    }

    /// What follows a written claim: the observers told, the jobs remembered, and the
    /// events and changes published; the jobs, in claim order.
    pub(super) fn leased(&self, claimed: Vec<(Job, JobEvent)>) -> Vec<Job> {
        let mut notes = Vec::with_capacity(claimed.len() * 2);
        let mut jobs = Vec::with_capacity(claimed.len());
        for (job, event) in claimed {
            self.observe(&job, [(event.kind.as_str(), &event.payload)]);
            notes.push(Notification::new(
                &job.id,
                NotificationKind::EventAppended { event_id: event.id },
            ));
            notes.push(Notification::new(&job.id, NotificationKind::JobChanged));
            jobs.push(job);
        }
        if let Some(recent) = &self.inner.last_written {
            recent.remember(&jobs);
        }
        self.inner.notifier.publish(notes);
        jobs
    }

    /// The limit of running jobs per repository a claim by `request` keeps to: the
    /// queue's or the worker's, whichever is lower.
    pub(crate) fn repository_limit(&self, request: &ClaimRequest) -> Option<u32> {
        let queue = self.inner.config.max_running_per_repository;
        match (queue, request.max_running_per_repository) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`claim`](Self::claim), waiting up to `wait` for a job to become claimable: woken at
    /// once when a job is created or requeued (here or, on PostgreSQL, on any replica), one
    /// idle claimer per job (see `waiters`), and every `claim_poll_interval` regardless, to
    /// notice retry windows that simply elapse. A job created on this replica while the
    /// claimer waits, and that it may run, is handed to it in the write that creates it.
    pub async fn claim_wait(
        &self,
        request: &ClaimRequest,
        wait: Duration,
    ) -> Result<Option<Job>, QueueError> {
        let deadline = Instant::now() + wait;
        // In line before the first attempt, so a job created between that attempt and the
        // wait still wakes us.
        let ticket = self.inner.waiters.join(Some(Arc::new(request.clone())));
        loop {
            let claimed = self.claim(request).await?;
            ticket.claimed(claimed.is_some());
            if claimed.is_some() {
                return Ok(claimed);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let nap = (deadline - now).min(self.inner.config.claim_poll_interval);
            if let Some(handed) = ticket.park(nap).await {
                return Ok(Some(handed));
            }
        }
    }

    /// Creates `queued` already claimed by a parked claimer (see `waiters`): one write with
    /// both events, `job.created` then `job.claimed`, and the job delivered to the claimer.
    /// A claimer that left before the delivery gets nothing, and the job goes back to the
    /// queue at once, as a lost claim would after its lease.
    pub(super) async fn hand_to_parked_claimer(
        &self,
        queued: Job,
        repository: &str,
        claimer: crate::waiters::Reservation,
    ) -> Result<Job, QueueError> {
        let now = queued.created_at;
        let lease =
            chrono::Duration::from_std(claimer.request.lease).unwrap_or(chrono::Duration::MAX);
        let mut job = queued.clone();
        machine::claim(
            &mut job,
            &claimer.request.worker_id,
            now,
            now.checked_add_signed(lease).unwrap_or(now),
        );
        let events = [
            machine::created_event(&queued),
            machine::claimed_event(&job, job.lease_expires_at),
        ];
        let stored = self.inner.db.create_job(&job, repository, &events).await?;
        self.observe(&job, stored.iter().map(|e| (e.kind.as_str(), &e.payload)));
        if let Some(recent) = &self.inner.last_written {
            recent.remember([&job]);
        }
        let mut notes: Vec<Notification> = stored
            .iter()
            .map(|e| Notification::new(&job.id, NotificationKind::EventAppended { event_id: e.id }))
            .collect();
        notes.push(Notification::new(&job.id, NotificationKind::JobChanged));
        self.inner.notifier.publish(notes);
        if claimer.deliver(job.clone()) {
            return Ok(job);
        }
        tracing::warn!(job_id = %job.id, "the claimer left before it got the job; requeued");
        let fence = Fence::of(&job).expect("a claimed job has a fence");
        self.transition(&job.id, |job, now| {
            let at_once = Retry {
                at: now,
                delay_ms: 0,
            };
            let why = "the claiming worker left before it received the job".to_string();
            machine::fail(job, &fence, now, why, true, at_once)
        })
        .await
    }
}

/// The lease of a claim by `request` of up to `limit` jobs, once both are checked.
pub(super) fn claim_lease(
    request: &ClaimRequest,
    limit: u32,
) -> Result<chrono::Duration, QueueError> {
    request.validate()?;
    if !(1..=MAX_CLAIM_BATCH).contains(&limit) {
        return Err(QueueError::invalid(
            "limit",
            format!("must be between 1 and {MAX_CLAIM_BATCH}"),
        ));
    }
    chrono::Duration::from_std(request.lease)
        .ok()
        .filter(|lease| *lease > chrono::Duration::zero())
        .ok_or_else(|| QueueError::invalid("lease", "must be a positive duration"))
}

/// The claim `request` makes at `now` of up to `limit` jobs for `lease`, with no
/// repository limit; `allowed_repositories` are its repositories as keys
/// ([`ClaimRequest::repository_keys`]).
pub(super) fn claim_sql<'a>(
    request: &'a ClaimRequest,
    allowed_repositories: Option<&'a [String]>,
    now: chrono::DateTime<chrono::Utc>,
    lease: chrono::Duration,
    limit: u32,
) -> ClaimSql<'a> {
    ClaimSql {
        worker_id: &request.worker_id,
        capabilities: &request.capabilities,
        allowed_types: request.allowed_types.as_deref(),
        allowed_repositories,
        now,
        lease_until: now.checked_add_signed(lease).unwrap_or(now),
        limit,
        repository_limit: None,
    }
}
