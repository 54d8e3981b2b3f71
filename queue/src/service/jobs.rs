//! Creating, reading and listing jobs.

use contract::{Job, JobId, JobState};
use uuid::Uuid;

use super::Queue;
use crate::error::{QueueError, refuse_nul};
use crate::machine;
use crate::notify::{Notification, NotificationKind};
use crate::store::ListSql;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    pub status: Option<JobState>,
    pub job_type: Option<String>,
    /// Page size: default [`JobFilter::DEFAULT_LIMIT`], at most [`JobFilter::MAX_LIMIT`].
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    pub after: Option<String>,
}

impl JobFilter {
    pub const DEFAULT_LIMIT: u32 = 50;
    pub const MAX_LIMIT: u32 = 200;
}

#[derive(Debug, Clone, PartialEq)]
pub struct JobPage {
    /// Newest first.
    pub jobs: Vec<Job>,
    /// Opaque; `None` on the last page.
    pub next_cursor: Option<String>,
}

impl Queue {
    /// Validates and normalizes `raw` (the job-create envelope) and queues it.
    pub async fn create_job(
        &self,
        raw: &serde_json::Value,
        created_by: Option<&str>,
    ) -> Result<Job, QueueError> {
        if raw.pointer("/payload/source").is_some() {
            // The delivery it names would be a job's key: only the server's integrations
            // write one (`create_sourced_job`).
            return Err(QueueError::invalid(
                "source",
                "set only by the server's integrations (a GitHub delivery): leave it out",
            ));
        }
        self.insert_job(raw, created_by).await
    }

    /// [`create_job`](Self::create_job) for any request, its source included.
    pub(super) async fn insert_job(
        &self,
        raw: &serde_json::Value,
        created_by: Option<&str>,
    ) -> Result<Job, QueueError> {
        let now = self.now();
        // Every field problem at once: the schedule's beside the task's.
        let (task, not_before, waits) = match (
            contract::normalize(raw, &self.inner.config.defaults),
            contract::not_before(raw, now),
            self.waits_for(raw).await,
        ) {
            (Ok(task), Ok(not_before), Ok(waits)) => (task, not_before, waits),
            (task, not_before, waits) => {
                let mut errors = task.err().unwrap_or_default();
                errors.extend(not_before.err());
                errors.extend(waits.err().unwrap_or_default());
                return Err(QueueError::Invalid(errors));
            }
        };
        let payload = serde_json::to_value(&task.payload)
            .map_err(|e| QueueError::invalid("payload", e.to_string()))?;
        // A start in the future: no claim takes the job before then. A job that waits for
        // others starts at the end of time, until the resolver releases it.
        let scheduled = match waits.is_empty() {
            true => not_before.filter(|at| *at > now),
            false => Some(super::dependencies::waiting_start()),
        };
        let job = Job {
            job_type: task.job_type.as_str().to_string(),
            priority: task.priority,
            affinity_key: task.affinity_key,
            required_capabilities: task.payload.required_capabilities.clone(),
            created_by_user_id: created_by.map(str::to_string),
            max_attempts: task.max_attempts,
            next_attempt_at: scheduled.map_or(now, super::stored),
            waiting_for: waits,
            ..Job::queued(Uuid::now_v7().into(), payload, now)
        };
        // Stored as its key: one repository written several ways is one for its limit
        // and for a worker token's repositories.
        let repository = &contract::rules::repository_key(&task.payload.repository);
        // A parked claimer takes only a job it may run now, and only when no limit of
        // running jobs per repository applies to it: that count is the claim's to make
        // (see `store::claims`), so such a claimer is woken to claim instead.
        if let Some(claimer) = scheduled
            .is_none()
            .then(|| {
                self.inner.waiters.reserve(|request| {
                    self.repository_limit(request).is_none() && request.accepts(&job, repository)
                })
            })
            .flatten()
        {
            return self.hand_to_parked_claimer(job, repository, claimer).await;
        }
        let created = self
            .inner
            .db
            .create_job(&job, repository, &[machine::created_event(&job)])
            .await?;
        self.record_wait(&job).await?;
        self.observe(&job, created.iter().map(|e| (e.kind.as_str(), &e.payload)));
        let mut notes: Vec<Notification> = created
            .iter()
            .map(|e| Notification::new(&job.id, NotificationKind::EventAppended { event_id: e.id }))
            .collect();
        notes.push(Notification::new(&job.id, NotificationKind::JobChanged));
        notes.push(Notification::new(&job.id, NotificationKind::JobAvailable));
        self.inner.notifier.publish(notes);
        Ok(job)
    }

    /// How many jobs are in each state now, on the whole database (for `/metrics`).
    pub async fn count_jobs_by_state(&self) -> Result<Vec<(JobState, u64)>, QueueError> {
        let rows = self.inner.db.count_by_status().await?;
        Ok(rows
            .into_iter()
            .filter_map(|(status, n)| {
                let state = status.parse::<JobState>().ok()?;
                Some((state, u64::try_from(n).unwrap_or(0)))
            })
            .collect())
    }

    pub async fn get_job(&self, id: &JobId) -> Result<Job, QueueError> {
        let mut job = self
            .inner
            .db
            .get_job(id.uuid())
            .await?
            .ok_or_else(|| QueueError::job_not_found(id))?;
        self.fill_wait(&mut job).await?;
        Ok(job)
    }

    /// Newest first, by keyset: a page never repeats or skips a job, however many are
    /// created meanwhile. The cursor is the last id of the page (opaque to callers).
    pub async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage, QueueError> {
        if let Some(job_type) = &filter.job_type {
            refuse_nul("type", job_type)?;
        }
        let limit = filter
            .limit
            .unwrap_or(JobFilter::DEFAULT_LIMIT)
            .clamp(1, JobFilter::MAX_LIMIT);
        let before = filter
            .after
            .as_deref()
            .map(|cursor| {
                Uuid::parse_str(cursor)
                    .map_err(|_| QueueError::invalid("after", "not a cursor this queue issued"))
            })
            .transpose()?;
        let mut jobs = self
            .inner
            .db
            .list_jobs(&ListSql {
                status: filter.status,
                job_type: filter.job_type.as_deref(),
                before,
                limit: i64::from(limit) + 1,
            })
            .await?;
        let more = jobs.len() > limit as usize;
        jobs.truncate(limit as usize);
        let next_cursor = if more {
            jobs.last().map(|job| job.id.to_string())
        } else {
            None
        };
        Ok(JobPage { jobs, next_cursor })
    }
}
