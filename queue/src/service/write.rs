//! How a transition reaches the store: decided on the job in Rust ([`crate::machine`]), then
//! written with its events and notifications in one transaction, or on PostgreSQL first by
//! a compare-and-swap that needs no lock.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use contract::{Job, JobId};

use super::Queue;
use crate::error::QueueError;
use crate::last_written::LastWritten;
use crate::lease::Fence;
use crate::machine::{self, Outcome, PendingEvent, Retry};
use crate::notify::{Notification, NotificationKind};
use crate::store::{Swap, Tx, folds, swappable};

/// How often a PostgreSQL transition re-reads a row that changed under it before it
/// takes the row lock instead (see `Queue::transition`).
const SWAP_ATTEMPTS: usize = 3;

/// What an outcome writes besides the row: its events, and the notifications of the
/// change (a heartbeat's `LeaseExtended` tells nobody).
fn changes(job_id: &JobId, outcome: Outcome) -> (Vec<PendingEvent>, Vec<Notification>) {
    match outcome {
        Outcome::Unchanged | Outcome::LeaseExtended => (Vec::new(), Vec::new()),
        Outcome::Changed { events, available } => {
            let mut notes = vec![Notification::new(job_id, NotificationKind::JobChanged)];
            if available {
                notes.push(Notification::new(job_id, NotificationKind::JobAvailable));
            }
            (events, notes)
        }
    }
}

/// One transition of [`Queue::transition_many`]: checks its guard and edits the job. It may
/// run more than once (on a remembered copy, then on the row), so it must only edit the job
/// it is given.
pub(super) type Apply<'a> =
    Box<dyn Fn(&mut Job, DateTime<Utc>) -> Result<Outcome, QueueError> + Send + Sync + 'a>;

impl Queue {
    /// Begins a write and locks job `id` in it: the start of every write that must see the
    /// row as it is (a transition under the lock, an event or artifact under a fence).
    pub(super) async fn lock(&self, id: &JobId) -> Result<(Tx, Job), QueueError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(id.uuid())
            .await?
            .ok_or_else(|| QueueError::job_not_found(id))?;
        Ok((tx, job))
    }

    /// [`lock`](Self::lock), refusing a worker whose lease on the job is gone.
    pub(super) async fn lock_fenced(
        &self,
        id: &JobId,
        fence: &Fence,
    ) -> Result<(Tx, Job), QueueError> {
        let (tx, job) = self.lock(id).await?;
        machine::check_fence(&job, fence)?;
        Ok((tx, job))
    }

    pub(super) async fn begin(&self) -> Result<Tx, QueueError> {
        Tx::begin(&self.inner.db).await
    }

    pub(super) async fn commit(&self, tx: Tx) -> Result<(), QueueError> {
        let notes = tx.commit().await?;
        self.inner.notifier.publish(notes);
        Ok(())
    }

    pub(super) fn retry_after(&self, attempt: u32, now: DateTime<Utc>) -> Retry {
        let delay = self.inner.config.retry_delay(attempt);
        let delay = chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
        Retry {
            at: now.checked_add_signed(delay).unwrap_or(now),
            delay_ms: delay.num_milliseconds(),
        }
    }

    /// Writes what a transition decided, in the transaction that locked the row.
    pub(super) async fn write_outcome(
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
        let events: Vec<(JobId, &PendingEvent)> = events.iter().map(|e| (job.id, e)).collect();
        self.write_back(tx, &[job], &events, notes, now).await
    }

    /// Saves the changed rows, appends their events (in order), queues the notifications
    /// of the change, and commits.
    pub(super) async fn write_back(
        &self,
        mut tx: Tx,
        saved: &[&Job],
        events: &[(JobId, &PendingEvent)],
        notes: Vec<Notification>,
        now: DateTime<Utc>,
    ) -> Result<(), QueueError> {
        tx.save_jobs(saved).await?;
        // A success the row keeps draws its id after the job's other events (it has none:
        // see `store::folds`).
        let kept: Vec<JobId> = saved
            .iter()
            .filter(|job| {
                folds(
                    job,
                    events
                        .iter()
                        .filter(|(id, _)| *id == job.id)
                        .map(|(_, e)| *e),
                )
            })
            .map(|job| job.id)
            .collect();
        let appended: Vec<(JobId, &PendingEvent)> = events
            .iter()
            .filter(|(id, _)| !kept.contains(id))
            .copied()
            .collect();
        tx.insert_events(&appended, now).await?;
        for id in &kept {
            tx.fold_completion(id).await?;
        }
        for note in notes {
            tx.notify(&note.job_id, note.kind);
        }
        self.commit(tx).await?;
        if let Some(recent) = &self.inner.last_written {
            recent.remember(saved.iter().copied());
        }
        for job in saved {
            let own = events.iter().filter(|(id, _)| *id == job.id);
            self.observe(job, own.map(|(_, e)| (e.kind.as_str(), &e.payload)));
        }
        Ok(())
    }

    /// Lets `apply` check its guard on the job and edit it, and writes the outcome.
    ///
    /// PostgreSQL first tries without a lock: read the row, decide, then write it back only
    /// if it is still exactly as read, with the events, in one statement ([`Database::write_job_if_unchanged`]):
    /// two round trips instead of five, and one when this replica remembers how it last
    /// wrote the row ([`LastWritten`]) and starts from that. A row that changed meanwhile is read again and
    /// decided again (`apply` may run more than once; it must only edit the job it is given),
    /// and after [`SWAP_ATTEMPTS`] the transition takes the row lock like SQLite always
    /// does, where the write lock makes locking free.
    pub(super) async fn transition<'a>(
        &self,
        id: &'a JobId,
        apply: impl Fn(&mut Job, DateTime<Utc>) -> Result<Outcome, QueueError> + Send + Sync + 'a,
    ) -> Result<Job, QueueError> {
        let write = |swap| async {
            let written = self.inner.db.write_job_if_unchanged(swap).await?;
            Ok(written.map(|ids| (ids, ())))
        };
        Ok(self.transition_with(id, apply, write).await?.0)
    }

    /// [`Self::transition`] whose swap `write` may write more in the same commit, and
    /// answers what it wrote besides (`None` for a transition written otherwise: under
    /// the lock, or not at all when it changed nothing).
    pub(super) async fn transition_with<'a, T, W>(
        &self,
        id: &'a JobId,
        apply: impl Fn(&mut Job, DateTime<Utc>) -> Result<Outcome, QueueError> + Send + Sync + 'a,
        write: impl Fn(Swap) -> W,
    ) -> Result<(Job, Option<T>), QueueError>
    where
        W: Future<Output = Result<Option<(Vec<i64>, T)>, QueueError>>,
    {
        if let Some(recent) = &self.inner.last_written {
            let mut guess = recent.get(id);
            let mut reads = 0;
            while reads < SWAP_ATTEMPTS {
                let now = self.now();
                let guessed = guess.is_some();
                let current = match guess.take() {
                    Some(job) => job,
                    None => {
                        reads += 1;
                        let read = self.inner.db.get_job(id.uuid()).await?;
                        Arc::new(read.ok_or_else(|| QueueError::job_not_found(id))?)
                    }
                };
                let mut job = Job::clone(&current);
                let (events, notes) = match apply(&mut job, now) {
                    // Only a write is checked against the row; a no-op or a refusal
                    // decided on a remembered copy is decided again on the row itself.
                    Ok(Outcome::Unchanged) | Err(_) if guessed => continue,
                    Ok(Outcome::Unchanged) => return Ok((job, None)),
                    Err(refused) => return Err(refused),
                    Ok(outcome) => changes(&job.id, outcome),
                };
                if !swappable(&current, &job) {
                    break;
                }
                let swap = Swap {
                    old: current,
                    new: job.clone(),
                    events: events.clone(),
                    now,
                };
                let Some((event_ids, besides)) = write(swap).await? else {
                    continue;
                };
                self.swapped(recent, &job, &events, event_ids, notes);
                return Ok((job, Some(besides)));
            }
        }
        let mut results = self.transition_locked(vec![(id, Box::new(apply))]).await?;
        let job = results.pop().expect("one answer per transition")?;
        Ok((job, None))
    }

    /// What follows a written swap: the row is remembered, the observers told, and the
    /// events and the change published.
    fn swapped(
        &self,
        recent: &LastWritten,
        job: &Job,
        events: &[PendingEvent],
        event_ids: Vec<i64>,
        notes: Vec<Notification>,
    ) {
        recent.remember([job]);
        self.observe(job, events.iter().map(|e| (e.kind.as_str(), &e.payload)));
        let mut published: Vec<Notification> = event_ids
            .into_iter()
            .map(|event_id| {
                Notification::new(&job.id, NotificationKind::EventAppended { event_id })
            })
            .collect();
        published.extend(notes);
        self.inner.notifier.publish(published);
    }

    /// Several transitions, each with its own answer, in the order given; one refused
    /// leaves the others to be written. The outer error is a failure of the write itself.
    ///
    /// On PostgreSQL, the jobs this replica remembers (a worker's batch it has just
    /// claimed, say) are decided on their remembered rows and written by one batched swap:
    /// one statement and one commit instead of a transaction's five round trips. Whatever
    /// that cannot settle (a row not remembered or changed meanwhile, a guard refused or a
    /// no-op on a remembered copy, a job named twice) goes on to [`Self::transition_locked`],
    /// which decides it again on the row itself.
    pub(super) async fn transition_many<'a>(
        &self,
        ops: Vec<(&'a JobId, Apply<'a>)>,
    ) -> Result<Vec<Result<Job, QueueError>>, QueueError> {
        let Some(recent) = &self.inner.last_written else {
            return self.transition_locked(ops).await;
        };
        let now = self.now();
        let mut named: HashMap<&JobId, usize> = HashMap::with_capacity(ops.len());
        for (id, _) in &ops {
            *named.entry(*id).or_default() += 1;
        }
        let mut swaps = Vec::new();
        for (n, (id, apply)) in ops.iter().enumerate() {
            let Some(current) = recent.get(id).filter(|_| named[id] == 1) else {
                continue;
            };
            let mut job = Job::clone(&current);
            let outcome = match apply(&mut job, now) {
                Ok(Outcome::Unchanged) | Err(_) => continue,
                Ok(_) if !swappable(&current, &job) => continue,
                Ok(outcome) => outcome,
            };
            let (events, notes) = changes(&job.id, outcome);
            let swap = Swap {
                old: current,
                new: job,
                events,
                now,
            };
            swaps.push((n, swap, notes));
        }
        let mut answers: Vec<Option<Result<Job, QueueError>>> =
            std::iter::repeat_with(|| None).take(ops.len()).collect();
        if !swaps.is_empty() {
            let batch: Vec<&Swap> = swaps.iter().map(|(_, swap, _)| swap).collect();
            // A failed statement wrote nothing: every job in it is left to the locked path,
            // which answers each on its own.
            let written = match self.inner.db.write_jobs_if_unchanged(&batch).await {
                Ok(written) => written,
                Err(error) => {
                    tracing::debug!(%error, "batched swap failed; writing under the lock");
                    vec![None; batch.len()]
                }
            };
            for ((n, swap, notes), event_ids) in swaps.into_iter().zip(written) {
                if let Some(event_ids) = event_ids {
                    self.swapped(recent, &swap.new, &swap.events, event_ids, notes);
                    answers[n] = Some(Ok(swap.new));
                }
            }
        }
        let (places, rest): (Vec<usize>, Vec<_>) = ops
            .into_iter()
            .enumerate()
            .filter(|(n, _)| answers[*n].is_none())
            .unzip();
        if !rest.is_empty() {
            for (n, answer) in places.into_iter().zip(self.transition_locked(rest).await?) {
                answers[n] = Some(answer);
            }
        }
        Ok(answers
            .into_iter()
            .map(|answer| answer.expect("every transition answered"))
            .collect())
    }

    /// Several transitions in one transaction: every job locked at once (in id order), each
    /// `apply` run on its job in the order given (two on one job see each other's result),
    /// then one write of the changed rows and one of the events. Each transition gets its
    /// own answer; one refused leaves the others to commit. The outer error is the
    /// transaction's own failure, which none of them survived.
    pub(super) async fn transition_locked<'a>(
        &self,
        ops: Vec<(&'a JobId, Apply<'a>)>,
    ) -> Result<Vec<Result<Job, QueueError>>, QueueError> {
        let now = self.now();
        let mut ids: Vec<_> = ops.iter().map(|(id, _)| id.uuid()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut tx = self.begin().await?;
        let mut jobs: HashMap<JobId, Job> = HashMap::with_capacity(ids.len());
        for job in tx.lock_jobs(&ids).await? {
            jobs.insert(job.id, job);
        }
        let mut results = Vec::with_capacity(ops.len());
        let mut dirty: Vec<JobId> = Vec::new();
        let mut events: Vec<(JobId, PendingEvent)> = Vec::new();
        let mut notes: Vec<Notification> = Vec::new();
        for (id, apply) in ops {
            let Some(job) = jobs.get_mut(id) else {
                results.push(Err(QueueError::job_not_found(id)));
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
                if !dirty.contains(&job.id) {
                    dirty.push(job.id);
                }
            }
            let (appended, changed) = changes(&job.id, outcome);
            events.extend(appended.into_iter().map(|e| (job.id, e)));
            notes.extend(changed);
            results.push(Ok(job.clone()));
        }
        if dirty.is_empty() {
            tx.rollback().await?;
            return Ok(results);
        }
        let saved: Vec<&Job> = dirty.iter().filter_map(|id| jobs.get(id)).collect();
        let appended: Vec<(JobId, &PendingEvent)> = events.iter().map(|(id, e)| (*id, e)).collect();
        self.write_back(tx, &saved, &appended, notes, now).await?;
        Ok(results)
    }
}
