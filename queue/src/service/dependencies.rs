//! Jobs that wait for others (`dependsOn`): what a request waits for, checked as it is
//! made; the edges read both ways; and one pass of the resolver, which releases a job
//! whose wait is over and cancels one whose wait can no longer end well.

use chrono::{DateTime, TimeZone, Utc};
use contract::{FieldError, Job, JobId, JobState};
use serde_json::Value;

use super::Queue;
use crate::error::QueueError;
use crate::notify::{Notification, NotificationKind};

/// The start of a job that waits: the end of time, which no claim reaches. The claim's
/// own index passes over it, so waiting costs the claim nothing.
pub(crate) fn waiting_start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 12, 31, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Waiting edges settled in one pass at most.
const AT_ONCE: i64 = 500;

/// A job's edges both ways, for its page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edges {
    /// The jobs it waits (or waited) for: `waiting`, `met` or `broken`.
    pub depends_on: Vec<(JobId, String)>,
    /// The jobs that wait (or waited) for it.
    pub needed_by: Vec<(JobId, String)>,
}

impl Queue {
    /// The jobs request `raw` waits for that have not succeeded yet; every problem named
    /// by its place in `dependsOn`.
    pub(super) async fn waits_for(&self, raw: &Value) -> Result<Vec<JobId>, Vec<FieldError>> {
        let ids = contract::depends_on(raw)?;
        if !ids.is_empty() && raw.get("notBefore").is_some_and(|v| !v.is_null()) {
            return Err(vec![FieldError::new(
                "notBefore",
                "a job that waits for others starts when they have succeeded: give dependsOn or notBefore, not both",
            )]);
        }
        let mut waiting = Vec::new();
        let mut errors = Vec::new();
        for (i, id) in ids.into_iter().enumerate() {
            let path = format!("dependsOn[{i}]");
            match self.inner.db.get_job(id.uuid()).await {
                Ok(Some(job)) => {
                    match job.status {
                        JobState::Succeeded => {}
                        JobState::Failed | JobState::Cancelled | JobState::DeadLetter => {
                            errors.push(FieldError::new(
                            path,
                            format!("job {id} already ended {}: a job waiting for it would never run", job.status),
                        ));
                        }
                        _ => waiting.push(id),
                    }
                }
                Ok(None) => errors.push(FieldError::new(path, format!("no job {id}"))),
                Err(error) => {
                    errors.push(FieldError::new(path, format!("could not be read: {error}")))
                }
            }
        }
        if errors.is_empty() {
            Ok(waiting)
        } else {
            Err(errors)
        }
    }

    /// Job `job`, just made, waits for its `waiting_for`. Edges that could not be written
    /// would leave it waiting for nothing, forever: it is cancelled instead, and the
    /// request refused.
    pub(super) async fn record_wait(&self, job: &Job) -> Result<(), QueueError> {
        if job.waiting_for.is_empty() {
            return Ok(());
        }
        if let Err(error) = self
            .inner
            .db
            .insert_dependencies(&job.id, &job.waiting_for)
            .await
        {
            let reason = "what it waits for could not be recorded: submit it again".to_string();
            if let Err(cancel) = self.request_cancel(&job.id, None, Some(reason)).await {
                tracing::warn!(%cancel, job = %job.id, "a job whose wait was not recorded could not be cancelled");
            }
            return Err(error.into());
        }
        Ok(())
    }

    /// Sets `job.waiting_for` from its edges, when it waits.
    pub(super) async fn fill_wait(&self, job: &mut Job) -> Result<(), QueueError> {
        if job.status == JobState::Queued && job.next_attempt_at >= waiting_start() {
            job.waiting_for = self
                .inner
                .db
                .dependencies_of(&job.id)
                .await?
                .into_iter()
                .filter(|(_, state)| state == "waiting")
                .map(|(id, _)| id)
                .collect();
        }
        Ok(())
    }

    /// Job `id`'s edges both ways.
    pub async fn job_edges(&self, id: &JobId) -> Result<Edges, QueueError> {
        Ok(Edges {
            depends_on: self.inner.db.dependencies_of(id).await?,
            needed_by: self.inner.db.dependents_of(id).await?,
        })
    }

    /// One pass of the resolver: for each job with a waiting edge whose job ended, a job
    /// all of whose dependencies succeeded starts now, and one with a dependency that did
    /// not is cancelled with a reason naming it; only then are its edges settled, so a
    /// pass cut short leaves them waiting and the next pass does it again (each step is
    /// idempotent). How many jobs it released or cancelled.
    pub async fn resolve_dependencies(&self) -> Result<usize, QueueError> {
        let ended = self.inner.db.ended_dependencies(AT_ONCE).await?;
        let mut waiting: Vec<JobId> = Vec::new();
        for edge in &ended {
            if !waiting.contains(&edge.job_id) {
                waiting.push(edge.job_id);
            }
        }
        let mut moved = 0;
        for id in waiting {
            let on = self.inner.db.dependency_states(&id).await?;
            let failed = on.iter().find(|(_, status)| {
                matches!(
                    status,
                    JobState::Failed | JobState::Cancelled | JobState::DeadLetter
                )
            });
            if let Some((other, status)) = failed {
                let reason = format!("job {other}, which it waited for, ended {status}");
                match self.request_cancel(&id, None, Some(reason)).await {
                    Ok(_) => moved += 1,
                    // It ended, or was cancelled, meanwhile: nothing to cancel.
                    Err(QueueError::StateConflict { .. } | QueueError::NotFound { .. }) => {}
                    Err(other) => return Err(other),
                }
            } else if on.iter().all(|(_, status)| *status == JobState::Succeeded) {
                let now = self.now();
                if self
                    .inner
                    .db
                    .release_waiting(&id, waiting_start(), now)
                    .await?
                {
                    moved += 1;
                    self.inner.notifier.publish(vec![
                        Notification::new(&id, NotificationKind::JobChanged),
                        Notification::new(&id, NotificationKind::JobAvailable),
                    ]);
                }
            }
            for edge in ended.iter().filter(|e| e.job_id == id) {
                let met = edge.status == JobState::Succeeded;
                self.inner.db.settle_dependency(edge, met).await?;
            }
        }
        Ok(moved)
    }
}
