//! [`Queue`]: the one service layer over the store. REST handlers, server functions and MCP
//! tools call these methods and nothing below them.
//!
//! Too long, and known to be: issue 16 splits it per concern (jobs, events, artifacts,
//! workers, tokens, sessions), each with its own `impl Queue` block.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::job::events;
use contract::{Artifact, Job, JobEvent, JobState, NewEvent, limits};
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

use crate::artifacts::{self, ArtifactContent, Incoming};
use crate::config::QueueConfig;
use crate::database::Database;
use crate::error::{Entity, QueueError};
use crate::machine::{self, Outcome, PendingEvent, Retry};
use crate::migrate;
use crate::notify::{Notification, NotificationKind, Notifier};
use crate::recent::RecentRows;
use crate::store::{ClaimSql, ListSql, Tx};
use crate::tokens::{self, NewToken, SessionPurpose, TokenKind, TokenRecord};
use crate::waiters::Waiters;
use crate::workers::{SeenCache, WorkerRecord};

/// The proof of a lease a worker presents with every write: its id and the attempt it
/// claimed. Once the lease is taken back (expired and requeued, reclaimed, cancelled), the
/// job's attempt or owner no longer match and the write is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub worker_id: String,
    pub attempt: u32,
}

impl Fence {
    pub fn new(worker_id: impl Into<String>, attempt: u32) -> Self {
        Fence {
            worker_id: worker_id.into(),
            attempt,
        }
    }

    /// The fence of the lease `job` was just claimed with.
    pub fn of(job: &Job) -> Option<Fence> {
        Some(Fence::new(job.claimed_by.clone()?, job.attempt))
    }
}

/// How often a PostgreSQL transition re-reads a row that changed under it before it
/// takes the row lock instead (see `Queue::transition`).
const SWAP_ATTEMPTS: usize = 3;

/// What an outcome writes besides the row: its events, and the notifications of the
/// change (a heartbeat's `Touched` tells nobody).
fn changes(job_id: &str, outcome: Outcome) -> (Vec<PendingEvent>, Vec<Notification>) {
    match outcome {
        Outcome::Unchanged | Outcome::Touched => (Vec::new(), Vec::new()),
        Outcome::Changed { events, available } => {
            let mut notes = vec![Notification::new(job_id, NotificationKind::JobChanged)];
            if available {
                notes.push(Notification::new(job_id, NotificationKind::JobAvailable));
            }
            (events, notes)
        }
    }
}

/// Most jobs one [`Queue::claim_many`] may lease.
pub const MAX_CLAIM_BATCH: u32 = 1000;

/// One transition of [`Queue::transition_many`]: checks its guard and edits the job.
type Apply<'a> =
    Box<dyn FnOnce(&mut Job, DateTime<Utc>) -> Result<Outcome, QueueError> + Send + 'a>;

/// One job of [`Queue::complete_many`].
#[derive(Debug, Clone)]
pub struct Completion {
    pub id: String,
    pub fence: Fence,
    pub summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub worker_id: String,
    /// What the worker offers; a job is claimable only if it requires a subset of these.
    pub capabilities: Vec<String>,
    /// `None`: any job type.
    pub allowed_types: Option<Vec<String>>,
    /// `None`: any repository. Compared exactly with the payload's `repository`.
    pub allowed_repositories: Option<Vec<String>>,
    /// How long the lease lasts without a heartbeat.
    pub lease: Duration,
}

impl ClaimRequest {
    /// The checks every claim passes first: a worker id, and no NUL in what it offers.
    pub fn validate(&self) -> Result<(), QueueError> {
        if self.worker_id.trim().is_empty() {
            return Err(QueueError::invalid("workerId", "must not be empty"));
        }
        refuse_nul("workerId", &self.worker_id)?;
        for (i, capability) in self.capabilities.iter().enumerate() {
            refuse_nul(&format!("capabilities[{i}]"), capability)?;
        }
        for (i, job_type) in self.allowed_types.iter().flatten().enumerate() {
            refuse_nul(&format!("allowedTypes[{i}]"), job_type)?;
        }
        Ok(())
    }

    /// Whether this claimer may take `job` (of `repository`), by the rules both claim
    /// statements apply: its required capabilities a subset of the claimer's, its type
    /// and repository allowed.
    pub(crate) fn accepts(&self, job: &Job, repository: &str) -> bool {
        job.required_capabilities
            .iter()
            .all(|c| self.capabilities.contains(c))
            && self
                .allowed_types
                .as_ref()
                .is_none_or(|types| types.contains(&job.job_type))
            && self
                .allowed_repositories
                .as_ref()
                .is_none_or(|repos| repos.iter().any(|r| r == repository))
    }
}

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

const EVENT_KIND_CHARS: usize = 100;
const MAX_EVENTS_PAGE: u32 = 1000;

/// The queue service. Cheap to clone; clones share one store, notifier and config.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    config: QueueConfig,
    notifier: Notifier,
    /// PostgreSQL only: rows this replica just wrote, the guess its transitions start from.
    recent: Option<RecentRows>,
    /// Idle `claim_wait` callers, woken one per available job.
    waiters: Waiters,
    /// Worker sightings this replica wrote lately.
    seen: SeenCache,
    /// Stops the PostgreSQL listener task when the last clone of the queue is dropped.
    _listener: DropGuard,
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("backend", &self.inner.db.backend())
            .field("origin", &self.inner.notifier.origin)
            .finish_non_exhaustive()
    }
}

fn parse_job_id(id: &str) -> Result<Uuid, QueueError> {
    Uuid::parse_str(id).map_err(|_| QueueError::job_not_found(id))
}

impl Queue {
    /// Wraps an open database. On PostgreSQL this also starts listening for other
    /// replicas' notifications, and returns only once LISTEN is in place.
    pub async fn open(db: Database, config: QueueConfig) -> Result<Queue, QueueError> {
        let mut notifier = Notifier::new();
        let stop = CancellationToken::new();
        if let Database::Postgres(pool) = &db {
            notifier.listen_postgres(pool, stop.clone()).await?;
            notifier = notifier.relay_postgres(pool.clone(), stop.clone());
        }
        let waiters = Waiters::default();
        waiters.clone().follow(notifier.subscribe(), stop.clone());
        Ok(Queue {
            inner: Arc::new(Inner {
                recent: matches!(db, Database::Postgres(_)).then(RecentRows::default),
                waiters,
                seen: SeenCache::default(),
                db,
                config,
                notifier,
                _listener: stop.drop_guard(),
            }),
        })
    }

    /// Brings the schema up to date (embedded migrations; idempotent).
    pub async fn migrate(&self) -> Result<(), QueueError> {
        Ok(migrate::run(&self.inner.db).await?)
    }

    pub fn database(&self) -> &Database {
        &self.inner.db
    }

    pub fn config(&self) -> &QueueConfig {
        &self.inner.config
    }

    /// Every change committed from now on, by this replica or (PostgreSQL) any other.
    pub fn subscribe(&self) -> broadcast::Receiver<Notification> {
        self.inner.notifier.subscribe()
    }

    /// The queue's clock, at the millisecond precision both backends store.
    pub fn now(&self) -> DateTime<Utc> {
        let now = self.inner.config.clock.now();
        DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now)
    }

    async fn begin(&self) -> Result<Tx, QueueError> {
        Tx::begin(&self.inner.db).await
    }

    async fn commit(&self, tx: Tx) -> Result<(), QueueError> {
        let notes = tx.commit().await?;
        self.inner.notifier.publish(notes);
        Ok(())
    }

    fn retry_after(&self, attempt: u32, now: DateTime<Utc>) -> Retry {
        let delay = self.inner.config.retry_delay(attempt);
        let delay = chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
        Retry {
            at: now.checked_add_signed(delay).unwrap_or(now),
            delay_ms: delay.num_milliseconds(),
        }
    }

    /// Writes what a transition decided, in the transaction that locked the row.
    async fn settle(
        &self,
        tx: Tx,
        job: &Job,
        outcome: Outcome,
        now: DateTime<Utc>,
    ) -> Result<(), QueueError> {
        if outcome == Outcome::Unchanged {
            return tx.rollback().await;
        }
        let (events, notes) = changes(&job.id, outcome);
        let events: Vec<(&str, &PendingEvent)> =
            events.iter().map(|e| (job.id.as_str(), e)).collect();
        self.write_back(tx, &[job], &events, notes, now).await
    }

    /// Saves the changed rows, appends their events (in order), queues the notifications
    /// of the change, and commits.
    async fn write_back(
        &self,
        mut tx: Tx,
        saved: &[&Job],
        events: &[(&str, &PendingEvent)],
        notes: Vec<Notification>,
        now: DateTime<Utc>,
    ) -> Result<(), QueueError> {
        tx.save_jobs(saved).await?;
        tx.insert_events(events, now).await?;
        for note in notes {
            tx.notify(&note.job_id, note.kind);
        }
        self.commit(tx).await?;
        if let Some(recent) = &self.inner.recent {
            recent.remember(saved.iter().copied());
        }
        Ok(())
    }

    /// Lets `apply` check its guard on the job and edit it, and writes the outcome.
    ///
    /// PostgreSQL first tries without a lock: read the row, decide, then write it back only
    /// if it is still exactly as read, with the events, in one statement ([`Database::swap_job`]):
    /// two round trips instead of five, and one when this replica remembers how it last
    /// wrote the row ([`RecentRows`]) and starts from that. A row that changed meanwhile is read again and
    /// decided again (`apply` may run more than once; it must only edit the job it is given),
    /// and after [`SWAP_ATTEMPTS`] the transition takes the row lock like SQLite always
    /// does, where the write lock makes locking free.
    async fn transition<'a>(
        &self,
        id: &'a str,
        apply: impl Fn(&mut Job, DateTime<Utc>) -> Result<Outcome, QueueError> + Send + Sync + 'a,
    ) -> Result<Job, QueueError> {
        let uuid = parse_job_id(id)?;
        if let Some(recent) = &self.inner.recent {
            let mut guess = recent.get(id);
            let mut reads = 0;
            while reads < SWAP_ATTEMPTS {
                let now = self.now();
                let guessed = guess.is_some();
                let current = match guess.take() {
                    Some(job) => job,
                    None => {
                        reads += 1;
                        self.inner
                            .db
                            .get_job(uuid)
                            .await?
                            .ok_or_else(|| QueueError::job_not_found(id))?
                    }
                };
                let mut job = current.clone();
                let (events, notes) = match apply(&mut job, now) {
                    // Only a write is checked against the row; a no-op or a refusal
                    // decided on a remembered copy is decided again on the row itself.
                    Ok(Outcome::Unchanged) | Err(_) if guessed => continue,
                    Ok(Outcome::Unchanged) => return Ok(job),
                    Err(refused) => return Err(refused),
                    Ok(outcome) => changes(&job.id, outcome),
                };
                let Some(event_ids) = self.inner.db.swap_job(&current, &job, &events, now).await?
                else {
                    continue;
                };
                recent.remember([&job]);
                let mut published: Vec<Notification> = event_ids
                    .into_iter()
                    .map(|event_id| {
                        Notification::new(&job.id, NotificationKind::EventAppended { event_id })
                    })
                    .collect();
                published.extend(notes);
                self.inner.notifier.publish(published);
                return Ok(job);
            }
        }
        let mut results = self.transition_many(vec![(id, Box::new(apply))]).await?;
        results.pop().expect("one answer per transition")
    }

    /// Several transitions in one transaction: every job locked at once (in id order), each
    /// `apply` run on its job in the order given (two on one job see each other's result),
    /// then one write of the changed rows and one of the events. Each transition gets its
    /// own answer; one refused leaves the others to commit. The outer error is the
    /// transaction's own failure, which none of them survived.
    async fn transition_many<'a>(
        &self,
        ops: Vec<(&'a str, Apply<'a>)>,
    ) -> Result<Vec<Result<Job, QueueError>>, QueueError> {
        let now = self.now();
        let mut ids: Vec<Uuid> = ops
            .iter()
            .filter_map(|(id, _)| Uuid::parse_str(id).ok())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut tx = self.begin().await?;
        let mut jobs: HashMap<Uuid, Job> = HashMap::with_capacity(ids.len());
        for job in tx.lock_jobs(&ids).await? {
            jobs.insert(parse_job_id(&job.id)?, job);
        }
        let mut results = Vec::with_capacity(ops.len());
        let mut dirty: Vec<Uuid> = Vec::new();
        let mut events: Vec<(String, PendingEvent)> = Vec::new();
        let mut notes: Vec<Notification> = Vec::new();
        for (id, apply) in ops {
            let Some(job) = parse_job_id(id).ok().and_then(|uuid| jobs.get_mut(&uuid)) else {
                results.push(Err(parse_job_id(id)
                    .err()
                    .unwrap_or_else(|| QueueError::job_not_found(id))));
                continue;
            };
            // On a copy: a refused transition leaves the job exactly as it was.
            let mut draft = job.clone();
            let outcome = match apply(&mut draft, now) {
                Ok(outcome) => outcome,
                Err(refused) => {
                    results.push(Err(refused));
                    continue;
                }
            };
            if outcome != Outcome::Unchanged {
                *job = draft;
                let uuid = parse_job_id(&job.id)?;
                if !dirty.contains(&uuid) {
                    dirty.push(uuid);
                }
            }
            let (appended, changed) = changes(&job.id, outcome);
            events.extend(appended.into_iter().map(|e| (job.id.clone(), e)));
            notes.extend(changed);
            results.push(Ok(job.clone()));
        }
        if dirty.is_empty() {
            tx.rollback().await?;
            return Ok(results);
        }
        let saved: Vec<&Job> = dirty.iter().filter_map(|uuid| jobs.get(uuid)).collect();
        let appended: Vec<(&str, &PendingEvent)> =
            events.iter().map(|(id, e)| (id.as_str(), e)).collect();
        self.write_back(tx, &saved, &appended, notes, now).await?;
        Ok(results)
    }

    /// Validates and normalizes `raw` (the job-create envelope) and queues it.
    pub async fn create_job(
        &self,
        raw: &serde_json::Value,
        created_by: Option<&str>,
    ) -> Result<Job, QueueError> {
        let task =
            contract::normalize(raw, &self.inner.config.defaults).map_err(QueueError::Invalid)?;
        let payload = serde_json::to_value(&task.payload)
            .map_err(|e| QueueError::invalid("payload", e.to_string()))?;
        let now = self.now();
        let job = Job {
            id: Uuid::now_v7().to_string(),
            job_type: task.job_type.as_str().to_string(),
            status: JobState::Queued,
            priority: task.priority,
            payload,
            affinity_key: task.affinity_key,
            required_capabilities: task.payload.required_capabilities.clone(),
            created_by_user_id: created_by.map(str::to_string),
            attempt: 0,
            max_attempts: task.max_attempts,
            next_attempt_at: now,
            claimed_by: None,
            lease_expires_at: None,
            cancel_requested_at: None,
            cancel_requested_by_user_id: None,
            cancel_reason: None,
            result_summary: None,
            error_message: None,
            started_at: None,
            finished_at: None,
            created_at: now,
            updated_at: now,
            usage: None,
        };
        let repository = &task.payload.repository;
        if let Some(claimer) = self
            .inner
            .waiters
            .reserve(|request| request.accepts(&job, repository))
        {
            return self.hand_over(job, repository, claimer).await;
        }
        let created = self
            .inner
            .db
            .create_job(&job, repository, &[machine::created_event(&job)])
            .await?;
        let mut notes: Vec<Notification> = created
            .iter()
            .map(|e| Notification::new(&job.id, NotificationKind::EventAppended { event_id: e.id }))
            .collect();
        notes.push(Notification::new(&job.id, NotificationKind::JobChanged));
        notes.push(Notification::new(&job.id, NotificationKind::JobAvailable));
        self.inner.notifier.publish(notes);
        Ok(job)
    }

    /// Creates `queued` already claimed by a parked claimer (see `waiters`): one write with
    /// both events, `job.created` then `job.claimed`, and the job delivered to the claimer.
    /// A claimer that left before the delivery gets nothing, and the job goes back to the
    /// queue at once, as a lost claim would after its lease.
    async fn hand_over(
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
            machine::claimed_event(&job),
        ];
        let stored = self.inner.db.create_job(&job, repository, &events).await?;
        if let Some(recent) = &self.inner.recent {
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

    pub async fn get_job(&self, id: &str) -> Result<Job, QueueError> {
        self.inner
            .db
            .get_job(parse_job_id(id)?)
            .await?
            .ok_or_else(|| QueueError::job_not_found(id))
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
            jobs.last().map(|job| job.id.clone())
        } else {
            None
        };
        Ok(JobPage { jobs, next_cursor })
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
        request.validate()?;
        if !(1..=MAX_CLAIM_BATCH).contains(&limit) {
            return Err(QueueError::invalid(
                "limit",
                format!("must be between 1 and {MAX_CLAIM_BATCH}"),
            ));
        }
        let lease = chrono::Duration::from_std(request.lease)
            .ok()
            .filter(|lease| *lease > chrono::Duration::zero())
            .ok_or_else(|| QueueError::invalid("lease", "must be a positive duration"))?;
        let now = self.now();
        let claimed = self
            .inner
            .db
            .claim_jobs(&ClaimSql {
                worker_id: &request.worker_id,
                capabilities: &request.capabilities,
                allowed_types: request.allowed_types.as_deref(),
                allowed_repositories: request.allowed_repositories.as_deref(),
                now,
                lease_until: now.checked_add_signed(lease).unwrap_or(now),
                limit,
            })
            .await?;
        let mut notes = Vec::with_capacity(claimed.len() * 2);
        let mut jobs = Vec::with_capacity(claimed.len());
        for (job, event) in claimed {
            notes.push(Notification::new(
                &job.id,
                NotificationKind::EventAppended { event_id: event.id },
            ));
            notes.push(Notification::new(&job.id, NotificationKind::JobChanged));
            jobs.push(job);
        }
        if let Some(recent) = &self.inner.recent {
            recent.remember(&jobs);
        }
        self.inner.notifier.publish(notes);
        Ok(jobs)
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

    /// Extends the lease; the returned job tells the worker whether a cancel was requested.
    /// A lease that expired but was not yet taken back can still be extended.
    pub async fn heartbeat(
        &self,
        id: &str,
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
        id: &str,
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
                (done.id.as_str(), apply)
            })
            .collect();
        self.transition_many(ops).await
    }

    /// running → queued after a backoff (retryable, attempts left), dead_letter (retryable,
    /// none left), failed (not retryable), or cancelled (a cancel was requested).
    pub async fn fail(
        &self,
        id: &str,
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
        id: &str,
        user_id: Option<&str>,
        reason: Option<String>,
    ) -> Result<Job, QueueError> {
        if let Some(reason) = &reason {
            refuse_nul("reason", reason)?;
            if reason.chars().count() > limits::CANCEL_REASON_CHARS {
                return Err(QueueError::invalid(
                    "reason",
                    format!("at most {} characters", limits::CANCEL_REASON_CHARS),
                ));
            }
        }
        self.transition(id, |job, now| {
            machine::request_cancel(job, user_id, reason.clone(), now)
        })
        .await
    }

    /// running with a cancel requested → cancelled, by the worker holding the lease. The
    /// same worker and attempt acknowledging again gets the cancelled job back.
    pub async fn ack_cancel(&self, id: &str, fence: &Fence) -> Result<Job, QueueError> {
        let uuid = parse_job_id(id)?;
        let now = self.now();
        let mut tx = self.begin().await?;
        let mut job = tx
            .lock_job(uuid)
            .await?
            .ok_or_else(|| QueueError::job_not_found(id))?;
        let acked_by = if job.status == JobState::Cancelled {
            tx.last_event(uuid, events::JOB_CANCELLED)
                .await?
                .and_then(|event| machine::acknowledged_by(&event.payload))
        } else {
            None
        };
        let outcome = machine::ack_cancel(&mut job, fence, now, acked_by.as_ref())?;
        self.settle(tx, &job, outcome, now).await?;
        Ok(job)
    }

    /// The lease rescuer's transition for one job; `None` if it needed none (the lease was
    /// renewed or the job finished since the rescuer looked).
    pub(crate) async fn expire_lease(&self, id: Uuid) -> Result<Option<Job>, QueueError> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let Some(mut job) = tx.lock_job(id).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        let retry = self.retry_after(job.attempt, now);
        let outcome = machine::expire_lease(&mut job, now, retry)?;
        if outcome == Outcome::Unchanged {
            tx.rollback().await?;
            return Ok(None);
        }
        self.settle(tx, &job, outcome, now).await?;
        Ok(Some(job))
    }

    pub(crate) async fn expired_leases(&self, limit: i64) -> Result<Vec<Uuid>, QueueError> {
        Ok(self.inner.db.expired_leases(self.now(), limit).await?)
    }

    /// A worker's event (`task.step.started`, ...) on the job it holds. Kinds starting with
    /// `job.` are the queue's own and refused, so the timeline's `job.*` entries always
    /// record what the queue did.
    ///
    /// A step's end (`task.step.finished`, `task.step.failed`) that carries `usage` adds it
    /// to the job's `usage` in the same transaction, so the totals always match the
    /// timeline; a `usage` that is not a [`contract::StepUsage`] is refused by name.
    pub async fn append_event(
        &self,
        id: &str,
        fence: &Fence,
        event: NewEvent,
    ) -> Result<JobEvent, QueueError> {
        validate_event(&event)?;
        let usage = contract::StepUsage::of_step_event(&event.kind, &event.payload)
            .map_err(|e| QueueError::Invalid(vec![e]))?;
        let mut payload = serde_json::Value::Object(event.payload);
        contract::text::replace_nul_in_json(&mut payload);
        let serde_json::Value::Object(payload) = payload else {
            unreachable!("an object stays an object")
        };
        let event = NewEvent {
            message: contract::text::replace_nul(&event.message).into_owned(),
            payload,
            ..event
        };
        let uuid = parse_job_id(id)?;
        let now = self.now();
        let mut tx = self.begin().await?;
        let mut job = tx
            .lock_job(uuid)
            .await?
            .ok_or_else(|| QueueError::job_not_found(id))?;
        machine::check_fence(&job, fence)?;
        let pending = PendingEvent {
            kind: event.kind,
            level: event.level,
            message: event.message,
            payload: event.payload,
        };
        let appended = tx.insert_event(&job.id, &pending, now).await?;
        if let Some(usage) = usage {
            // Every attempt's steps count: a retried step was paid for twice.
            let total = job.usage.unwrap_or_default() + usage;
            tx.set_usage(&job.id, &total).await?;
            job.usage = Some(total);
        }
        // Step ends are progress kinds, so lists learn of new totals from this one.
        if contract::job::task::is_progress(&appended.kind) {
            tx.notify(&job.id, NotificationKind::StepProgress);
        }
        self.commit(tx).await?;
        if let (Some(recent), Some(_)) = (&self.inner.recent, usage) {
            // So the job a later transition answers from its remembered row has the
            // totals too (the row lock made this read the newest).
            recent.remember([&job]);
        }
        Ok(appended)
    }

    /// The job's events with ids above `after` (0 for all), oldest first, at most `limit`
    /// (1 to 1000).
    pub async fn list_events(
        &self,
        id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let uuid = parse_job_id(id)?;
        let limit = i64::from(limit.clamp(1, MAX_EVENTS_PAGE));
        let events = self.inner.db.list_events(uuid, after, limit).await?;
        if events.is_empty() && self.inner.db.get_job(uuid).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        Ok(events)
    }

    /// The newest `limit` (1 to 1000) events of the job, oldest first: the end of a long
    /// timeline, for a page that shows the latest activity.
    pub async fn list_latest_events(
        &self,
        id: &str,
        limit: u32,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let uuid = parse_job_id(id)?;
        let limit = i64::from(limit.clamp(1, MAX_EVENTS_PAGE));
        let mut events = self.inner.db.list_newest_events(uuid, limit).await?;
        if events.is_empty() && self.inner.db.get_job(uuid).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        events.reverse();
        Ok(events)
    }

    /// [`list_events`](Self::list_events) leaving out the events of kind `except` (a
    /// step's log lines, say, which outnumber every other kind by far).
    pub async fn list_events_except(
        &self,
        id: &str,
        except: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let uuid = parse_job_id(id)?;
        let limit = i64::from(limit.clamp(1, MAX_EVENTS_PAGE));
        let events = self
            .inner
            .db
            .list_events_except(uuid, except, after, limit)
            .await?;
        if events.is_empty() && self.inner.db.get_job(uuid).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        Ok(events)
    }

    /// How many events the job has.
    pub async fn count_events(&self, id: &str) -> Result<u64, QueueError> {
        let uuid = parse_job_id(id)?;
        let n = self.inner.db.count_events(uuid).await?;
        if n == 0 && self.inner.db.get_job(uuid).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// How many steps each task has finished in its current attempt (`task.step.finished`
    /// events since its latest claim), for a list of jobs; a job with none is left out.
    /// Unknown ids are ignored.
    pub async fn steps_finished(&self, ids: &[&str]) -> Result<HashMap<String, u32>, QueueError> {
        let uuids: Vec<Uuid> = ids
            .iter()
            .filter_map(|id| Uuid::parse_str(id).ok())
            .collect();
        let counts = self
            .inner
            .db
            .count_kind_since(
                &uuids,
                contract::job::task::STEP_FINISHED,
                events::JOB_CLAIMED,
            )
            .await?;
        Ok(counts
            .into_iter()
            .map(|(id, n)| (id.to_string(), u32::try_from(n).unwrap_or(u32::MAX)))
            .collect())
    }

    /// Receives an upload aside, on this replica's disk, hashing and counting it as it
    /// comes and refusing it past the artifact limit; [`store_artifact`](Self::store_artifact)
    /// then stores it under a job.
    pub async fn receive_artifact(
        &self,
        reader: impl tokio::io::AsyncRead + Unpin,
    ) -> Result<Incoming, QueueError> {
        let config = &self.inner.config;
        Incoming::receive(&config.artifacts_dir, reader, config.max_artifact_bytes).await
    }

    /// Stores `bytes` as the job's artifact `name` ([`receive_artifact`](Self::receive_artifact)
    /// then [`store_artifact`](Self::store_artifact)).
    pub async fn add_artifact(
        &self,
        id: &str,
        fence: &Fence,
        name: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<Artifact, QueueError> {
        artifacts::validate_name(name)?;
        let incoming = self.receive_artifact(bytes).await?;
        self.store_artifact(id, fence, name, content_type, incoming)
            .await
    }

    /// Stores a received upload as the job's artifact `name`, replacing an earlier one of
    /// that name, while the job row is locked and the worker's fence checked, so a stale
    /// worker can neither add nor overwrite one. On SQLite the file moves under the
    /// artifacts directory; on PostgreSQL its bytes go into the database in the same
    /// transaction as the metadata, so every replica can serve it.
    pub async fn store_artifact(
        &self,
        id: &str,
        fence: &Fence,
        name: &str,
        content_type: &str,
        incoming: Incoming,
    ) -> Result<Artifact, QueueError> {
        artifacts::validate_name(name)?;
        let content_type = artifacts::content_type(content_type)?;
        let uuid = parse_job_id(id)?;
        let now = self.now();
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(uuid)
            .await?
            .ok_or_else(|| QueueError::job_not_found(id))?;
        machine::check_fence(&job, fence)?;
        let names = tx.artifact_names(&job.id).await?;
        if names.iter().any(|other| artifacts::collides(name, other)) {
            return Err(QueueError::invalid(
                "name",
                format!("{name:?} collides with another artifact's path"),
            ));
        }
        let artifact = tx
            .upsert_artifact(&Artifact {
                id: Uuid::now_v7().to_string(),
                job_id: job.id.clone(),
                name: name.to_string(),
                size: incoming.size,
                content_type,
                sha256: incoming.sha256.clone(),
                created_at: now,
            })
            .await?;
        tx.replace_artifact_chunks(&artifact.id, incoming.path())
            .await?;
        if matches!(self.inner.db, Database::Sqlite(_)) {
            // Moved before the commit: if the commit then failed, the file would be newer
            // than its metadata, which a re-upload repairs; the other order could leave
            // metadata pointing at a file that never arrived.
            let dir = &self.inner.config.artifacts_dir;
            incoming
                .publish(&artifacts::path_of(dir, &job.id, name))
                .await?;
        }
        self.commit(tx).await?;
        Ok(artifact)
    }

    /// The job's artifacts, by name.
    pub async fn list_artifacts(&self, id: &str) -> Result<Vec<Artifact>, QueueError> {
        let uuid = parse_job_id(id)?;
        if self.inner.db.get_job(uuid).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        Ok(self.inner.db.list_artifacts(uuid).await?)
    }

    /// An artifact's metadata and where to read its bytes, for the caller to stream.
    pub async fn open_artifact(
        &self,
        id: &str,
        name: &str,
    ) -> Result<(Artifact, ArtifactContent), QueueError> {
        let uuid = parse_job_id(id)?;
        let not_found = || QueueError::NotFound {
            entity: Entity::Artifact,
            id: format!("{id}/{name}"),
        };
        if artifacts::validate_name(name).is_err() {
            return Err(not_found());
        }
        let artifact = self
            .inner
            .db
            .get_artifact(uuid, name)
            .await?
            .ok_or_else(not_found)?;
        let content = self.content_of(&artifact)?;
        Ok((artifact, content))
    }

    /// An artifact found by its id, and where to read its bytes.
    pub async fn artifact_by_id(
        &self,
        id: &str,
        artifact_id: &str,
    ) -> Result<(Artifact, ArtifactContent), QueueError> {
        let artifact = self
            .list_artifacts(id)
            .await?
            .into_iter()
            .find(|a| a.id == artifact_id)
            .ok_or_else(|| QueueError::NotFound {
                entity: Entity::Artifact,
                id: format!("{id}/{artifact_id}"),
            })?;
        let content = self.content_of(&artifact)?;
        Ok((artifact, content))
    }

    fn content_of(&self, artifact: &Artifact) -> Result<ArtifactContent, QueueError> {
        Ok(match &self.inner.db {
            Database::Sqlite(_) => ArtifactContent::File(artifacts::path_of(
                &self.inner.config.artifacts_dir,
                &artifact.job_id,
                &artifact.name,
            )),
            db @ Database::Postgres(_) => ArtifactContent::Chunks {
                db: db.clone(),
                artifact_id: Uuid::parse_str(&artifact.id)
                    .map_err(|_| QueueError::invalid("artifactId", "not an artifact id"))?,
            },
        })
    }

    /// An artifact found by its id, with the first `max_bytes` of its content and whether
    /// there was more: for a page that shows a log or a patch.
    pub async fn read_artifact(
        &self,
        id: &str,
        artifact_id: &str,
        max_bytes: u64,
    ) -> Result<(Artifact, Vec<u8>, bool), QueueError> {
        let (artifact, content) = self.artifact_by_id(id, artifact_id).await?;
        let (bytes, more) = content.read_start(max_bytes).await?;
        Ok((artifact, bytes, more))
    }

    pub async fn create_token(&self, token: NewToken) -> Result<TokenRecord, QueueError> {
        token.validate().map_err(QueueError::Invalid)?;
        match self
            .inner
            .db
            .insert_token(Uuid::now_v7(), &token, self.now())
            .await
        {
            Ok(record) => Ok(record),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(QueueError::invalid(
                "tokenHash",
                "another token already has this hash",
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// The non-revoked token with this hash (lowercase hex SHA-256 of the secret).
    /// Stores `token` only if no live token exists yet (a fresh installation's first
    /// admin), atomically across replicas: `None` when another got there first.
    pub async fn create_first_token(
        &self,
        token: NewToken,
    ) -> Result<Option<TokenRecord>, QueueError> {
        token.validate().map_err(QueueError::Invalid)?;
        Ok(self
            .inner
            .db
            .insert_first_token(Uuid::now_v7(), &token, self.now())
            .await?)
    }

    pub async fn find_token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>, QueueError> {
        Ok(self.inner.db.find_token_by_hash(hash).await?)
    }

    /// Every token, revoked ones included, newest first.
    pub async fn list_tokens(&self) -> Result<Vec<TokenRecord>, QueueError> {
        Ok(self.inner.db.list_tokens().await?)
    }

    /// Revokes the token; revoking again keeps the first revocation time.
    pub async fn revoke_token(&self, id: &str) -> Result<TokenRecord, QueueError> {
        let not_found = || QueueError::NotFound {
            entity: Entity::Token,
            id: id.to_string(),
        };
        let uuid = Uuid::parse_str(id).map_err(|_| not_found())?;
        self.inner
            .db
            .revoke_token(uuid, self.now())
            .await?
            .ok_or_else(not_found)
    }

    /// Records that the token was just used.
    pub async fn touch_token(&self, id: &str) -> Result<(), QueueError> {
        let not_found = || QueueError::NotFound {
            entity: Entity::Token,
            id: id.to_string(),
        };
        let uuid = Uuid::parse_str(id).map_err(|_| not_found())?;
        if self.inner.db.touch_token(uuid, self.now()).await? {
            Ok(())
        } else {
            Err(not_found())
        }
    }

    /// Ties a secret (by its SHA-256) to a live user token for `ttl`: a dashboard session,
    /// or a one-time login code. Returns when it expires.
    pub async fn create_session(
        &self,
        token_id: &str,
        purpose: SessionPurpose,
        secret_hash: &str,
        ttl: Duration,
    ) -> Result<DateTime<Utc>, QueueError> {
        if !tokens::is_sha256_hex(secret_hash) {
            return Err(QueueError::invalid(
                "secretHash",
                "must be a lowercase hex SHA-256 (64 characters)",
            ));
        }
        let not_found = || QueueError::NotFound {
            entity: Entity::Token,
            id: token_id.to_string(),
        };
        let uuid = Uuid::parse_str(token_id).map_err(|_| not_found())?;
        let token = self
            .inner
            .db
            .find_token_by_id(uuid)
            .await?
            .ok_or_else(not_found)?;
        if token.kind != TokenKind::User {
            return Err(QueueError::invalid(
                "tokenId",
                "only a user token can open a dashboard session",
            ));
        }
        let now = self.now();
        let ttl =
            chrono::TimeDelta::from_std(ttl).map_err(|_| QueueError::invalid("ttl", "too long"))?;
        let expires_at = now + ttl;
        self.inner
            .db
            .insert_session(secret_hash, uuid, purpose, now, expires_at)
            .await?;
        Ok(expires_at)
    }

    /// The token behind a live session: `None` once it expired, ended, or its token was
    /// revoked.
    pub async fn find_session(&self, secret_hash: &str) -> Result<Option<TokenRecord>, QueueError> {
        Ok(self
            .inner
            .db
            .find_session_token(secret_hash, self.now())
            .await?)
    }

    /// Uses up a login code: the first call gets its token (if the code is unexpired and
    /// the token live), every later call `None`.
    pub async fn redeem_login_code(
        &self,
        secret_hash: &str,
    ) -> Result<Option<TokenRecord>, QueueError> {
        let db = &self.inner.db;
        match db
            .delete_session(secret_hash, SessionPurpose::Login, self.now())
            .await?
        {
            Some(token_id) => Ok(db.find_token_by_id(token_id).await?),
            None => Ok(None),
        }
    }

    /// Logs a session out; ending one that is gone already is not an error.
    pub async fn end_session(&self, secret_hash: &str) -> Result<(), QueueError> {
        self.inner
            .db
            .delete_session(secret_hash, SessionPurpose::Session, self.now())
            .await?;
        Ok(())
    }

    /// Records that worker `id` is alive: at a claim with the capabilities it claimed with
    /// (and its version, if it said), at a heartbeat with neither. Unchanged sightings are
    /// written at most every [`WRITE_EVERY`](crate::workers::WRITE_EVERY).
    pub async fn worker_seen(
        &self,
        id: &str,
        capabilities: Option<&[String]>,
        version: Option<&str>,
    ) -> Result<(), QueueError> {
        for (i, capability) in capabilities.unwrap_or_default().iter().enumerate() {
            refuse_nul(&format!("capabilities[{i}]"), capability)?;
        }
        if let Some(version) = version {
            refuse_nul("workerVersion", version)?;
        }
        let now = self.now();
        if !self.inner.seen.should_write(id, capabilities, version, now) {
            return Ok(());
        }
        Ok(self
            .inner
            .db
            .upsert_worker(id, capabilities, version, now)
            .await?)
    }

    /// Every worker seen, most recently seen first, with the jobs each holds now.
    pub async fn list_workers(&self) -> Result<Vec<WorkerRecord>, QueueError> {
        let mut workers = self.inner.db.list_workers().await?;
        let running = self
            .list_jobs(&JobFilter {
                status: Some(JobState::Running),
                limit: Some(JobFilter::MAX_LIMIT),
                ..JobFilter::default()
            })
            .await?;
        for job in running.jobs {
            let owner = workers
                .iter_mut()
                .find(|w| job.claimed_by.as_deref() == Some(w.id.as_str()));
            if let Some(owner) = owner {
                owner.running_jobs.push(job.id);
            }
        }
        Ok(workers)
    }

    /// How many tokens are not revoked: zero tells the server to bootstrap an admin token.
    pub async fn count_tokens(&self) -> Result<u64, QueueError> {
        let n = self.inner.db.count_active_tokens().await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

fn validate_event(event: &NewEvent) -> Result<(), QueueError> {
    let kind = &event.kind;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':');
    if kind.is_empty() || kind.chars().count() > EVENT_KIND_CHARS || !kind.chars().all(allowed) {
        return Err(QueueError::invalid(
            "kind",
            format!("must be 1 to {EVENT_KIND_CHARS} of a-z, A-Z, 0-9, '.', '_', '-', ':'"),
        ));
    }
    if kind.starts_with(events::RESERVED_PREFIX) {
        return Err(QueueError::invalid(
            "kind",
            format!(
                "`{}` kinds are reserved for the queue",
                events::RESERVED_PREFIX
            ),
        ));
    }
    if event.message.len() > limits::EVENT_MESSAGE_BYTES {
        return Err(QueueError::TooLarge {
            what: "event message",
            size: event.message.len() as u64,
            limit: limits::EVENT_MESSAGE_BYTES as u64,
        });
    }
    let payload_size = serde_json::to_vec(&event.payload)
        .map(|bytes| bytes.len() as u64)
        .unwrap_or(u64::MAX);
    if payload_size > limits::EVENT_PAYLOAD_BYTES as u64 {
        return Err(QueueError::TooLarge {
            what: "event payload",
            size: payload_size,
            limit: limits::EVENT_PAYLOAD_BYTES as u64,
        });
    }
    Ok(())
}

/// Typed text with a NUL is refused (see [`contract::text`]).
fn refuse_nul(path: &str, text: &str) -> Result<(), QueueError> {
    contract::text::refuse_nul(path, text).map_err(|e| QueueError::Invalid(vec![e]))
}

/// Text a worker reports (an error message, a summary): NULs replaced, size bounded.
fn reported(what: &'static str, text: String) -> Result<String, QueueError> {
    if text.len() > limits::REPORTED_TEXT_BYTES {
        return Err(QueueError::TooLarge {
            what,
            size: text.len() as u64,
            limit: limits::REPORTED_TEXT_BYTES as u64,
        });
    }
    Ok(contract::text::replace_nul(&text).into_owned())
}
