//! A job's claim and success kept in its row (migrations 0021, 0022) instead of event rows:
//! the claim statements and the completion draw the event's id from the events' own
//! sequence into the row, readers build the events from the row with the builders the
//! writes used (`machine::claimed_event`, `machine::completed_event`), and a write that
//! would change what the row says of them writes them out as rows under their ids first.
//! What a reader sees never changes.

use chrono::{DateTime, Utc};
use contract::job::events::JOB_COMPLETED;
use contract::{Job, JobEvent, JobId, JobState};
use sqlx::Row;
use uuid::Uuid;

use super::live::shape;
use super::postgres::FOLD_SUCCESS;
use super::sqlite::{DRAW_EVENT_IDS, RowExt};
use super::{Arg, Id, Tx, TxConn, pg_rows, sqlite_rows};
use crate::QueueError;
use crate::machine::{self, PendingEvent};
use crate::notify::NotificationKind;
use crate::store::Database;

/// What of a job's timeline its row keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Kept {
    pub claimed: Option<KeptClaim>,
    /// The id of its `job.completed`.
    pub completed: Option<i64>,
}

/// A `job.claimed` the row keeps: its id, when, and the lease the claim gave (heartbeats
/// move the row's). The worker and the attempt are the row's while the claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeptClaim {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub lease_until: Option<DateTime<Utc>>,
}

const FOLD_SQLITE: &str = "UPDATE jobs SET completed_event_id = $2 WHERE id = $1";

const UNFOLD: &str = "UPDATE jobs SET claimed_event_id = NULL, claimed_at = NULL, \
     claim_lease_until = NULL, completed_event_id = NULL WHERE id = $1";

/// What a live row keeps of the claim (`live.rs`), written out too.
const UNFOLD_LIVE: &str = "UPDATE job_queue SET claimed_event_id = NULL, claimed_at = NULL, \
     claim_lease_until = NULL WHERE id = $1 AND claimed_event_id IS NOT NULL";

const WRITE_OUT_POSTGRES: &str = "INSERT INTO job_events \
     (id, job_id, kind, level, message, payload, created_at) OVERRIDING SYSTEM VALUE \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
const WRITE_OUT_SQLITE: &str = "INSERT INTO job_events \
     (id, job_id, kind, level, message, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";

const KEPT_JOB: &str = concat!(
    "SELECT ",
    job_columns!(),
    ", ",
    kept_columns!(),
    " FROM ",
    job_from!(),
    " WHERE j.id = $1"
);

/// Whether a transition's events are a success the row keeps: the job ended succeeded and
/// its one event is `job.completed`. Only then, so that no event of the same write could
/// draw its id before the success's.
pub(crate) fn folds<'a>(job: &Job, events: impl IntoIterator<Item = &'a PendingEvent>) -> bool {
    let mut events = events.into_iter();
    job.status == JobState::Succeeded
        && events.next().is_some_and(|only| only.kind == JOB_COMPLETED)
        && events.next().is_none()
}

/// Whether `new` still says what `old`'s claim said: it is the same attempt of the same
/// worker, running or succeeded. Anything else ends the claim the row may keep.
fn claim_stands(old: &Job, new: &Job) -> bool {
    matches!(new.status, JobState::Running | JobState::Succeeded)
        && new.claimed_by == old.claimed_by
        && new.attempt == old.attempt
}

/// Whether the transition of `old` to `new` may be written by a lock-free swap: not when
/// it changes a job whose row may keep an event the change ends (a succeeded job, or a
/// running job leaving its claim), which only a write under the lock writes out first.
/// So successes and heartbeats swap; failures, retries and lost leases take the lock. A
/// job queued again after it finished takes it too: the save that queues it tells
/// retention to look at it again (`walks.rs`).
/// One that makes a job live again does too: the save makes its live row (`live.rs`).
pub(crate) fn swappable(old: &Job, new: &Job) -> bool {
    if old.finished_at.is_some() && new.finished_at.is_none() || shape(old, new).is_none() {
        return false;
    }
    match old.status {
        JobState::Succeeded => false,
        JobState::Running => claim_stands(old, new),
        _ => true,
    }
}

impl Tx {
    /// Keeps `job`'s success in its row: draws the event's id and announces it as an
    /// appended event would be.
    pub(crate) async fn fold_completion(&mut self, job: &JobId) -> Result<i64, QueueError> {
        let id = Arg::Id(job.uuid());
        let event_id: i64 = match &mut self.conn {
            TxConn::Postgres(t) => {
                pg_rows(t, FOLD_SUCCESS, &[id], |r| r.try_get("completed_event_id"))
                    .await?
                    .into_iter()
                    .next()
                    .ok_or(sqlx::Error::RowNotFound)?
            }
            TxConn::Sqlite(t) => {
                let drawn: i64 =
                    sqlite_rows(t, DRAW_EVENT_IDS, &[Arg::BigInt(1)], |r| r.try_get("seq"))?
                        .into_iter()
                        .next()
                        .ok_or(sqlx::Error::RowNotFound)?;
                sqlite_rows(t, FOLD_SQLITE, &[id, Arg::BigInt(drawn)], |_| Ok(()))?;
                drawn
            }
        };
        self.notify(job, NotificationKind::EventAppended { event_id });
        Ok(event_id)
    }

    /// What a lock learns of the row besides the job: what its row keeps, remembered as
    /// the job was locked for [`Self::write_out_changed`], since most writes under the
    /// lock leave it as it is (an event appended, a heartbeat, a notification recorded).
    pub(super) fn locked(&mut self, job: &Job, kept: Kept) {
        if kept == Kept::default() {
            return;
        }
        self.kept.retain(|(locked, _)| locked.id != job.id);
        self.kept.push((job.clone(), kept));
    }

    /// Before `saved` are written: what the row of each keeps and the save would change
    /// becomes event rows, built from the job as it was locked. Any save of a succeeded
    /// job changes it (a next round); a running job's claim stands while the attempt does.
    pub(super) async fn write_out_changed(&mut self, saved: &[&Job]) -> Result<(), QueueError> {
        for new in saved {
            let Some(at) = self.kept.iter().position(|(old, _)| old.id == new.id) else {
                continue;
            };
            let (old, _) = &self.kept[at];
            if old.status != JobState::Succeeded && claim_stands(old, new) {
                continue;
            }
            let (old, kept) = self.kept.swap_remove(at);
            self.write_out(&old, kept).await?;
        }
        Ok(())
    }

    /// Before a write that changes `job`'s timeline itself (retention deleting it): all
    /// its row keeps becomes event rows, as they read.
    pub(super) async fn write_out_kept(&mut self, job: Uuid) -> Result<(), QueueError> {
        let Some(at) = self.kept.iter().position(|(old, _)| old.id.uuid() == job) else {
            return Ok(());
        };
        let (old, kept) = self.kept.swap_remove(at);
        self.write_out(&old, kept).await
    }

    /// `kept` of `job` as event rows under their own ids, oldest first, and the row clear
    /// of them.
    async fn write_out(&mut self, job: &Job, kept: Kept) -> Result<(), QueueError> {
        let events = rebuilt(job, &kept);
        if events.is_empty() {
            return Ok(());
        }
        for event in &events {
            let args = [
                Arg::BigInt(event.id),
                Arg::Id(job.id.uuid()),
                Arg::text(&event.kind),
                Arg::text(event.level.as_str()),
                Arg::text(&event.message),
                Arg::json(&event.payload)?,
                Arg::at(event.created_at),
            ];
            match &mut self.conn {
                TxConn::Sqlite(t) => sqlite_rows(t, WRITE_OUT_SQLITE, &args, |_| Ok(()))?,
                TxConn::Postgres(t) => pg_rows(t, WRITE_OUT_POSTGRES, &args, |_| Ok(())).await?,
            };
        }
        self.execute(UNFOLD, &[Arg::Id(job.id.uuid())]).await?;
        self.execute(UNFOLD_LIVE, &[Arg::Id(job.id.uuid())]).await
    }
}

impl Database {
    /// The job as it is, with what its row keeps of its timeline.
    pub(crate) async fn kept_job(&self, job: Uuid) -> Result<Option<(Job, Kept)>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(KEPT_JOB).bind(Id(job)).fetch_optional(p).await?;
            row.map(|row| Ok((job_from_row!(&row)?, kept_from_row!(&row)?)))
                .transpose()
        })
    }
}

/// The events `job`'s row keeps, in id order, as the claim and the completion built them.
pub(crate) fn rebuilt(job: &Job, kept: &Kept) -> Vec<JobEvent> {
    let claimed = kept.claimed.map(|claim| {
        machine::claimed_event(job, claim.lease_until).stored(&job.id, claim.id, claim.at)
    });
    let completed = kept.completed.map(|id| {
        let at = job.finished_at.unwrap_or(job.updated_at);
        machine::completed_event(job).stored(&job.id, id, at)
    });
    claimed.into_iter().chain(completed).collect()
}
