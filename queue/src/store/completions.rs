//! A job's success kept in its row (migration 0021): a completion draws its `job.completed`
//! id from the events' own sequence into `jobs.completed_event_id` instead of writing an
//! event row, readers build the event from the row with the builder the completion used
//! (`machine::completed_event`), and the first write that changes a succeeded job again
//! writes the event out as a row under its id first. What a reader sees never changes.

use contract::job::events::JOB_COMPLETED;
use contract::{Job, JobEvent, JobId, JobState};
use sqlx::Row;
use uuid::Uuid;

use super::sqlite::RowExt;
use super::{Arg, Id, Tx, TxConn, pg_rows, sqlite_rows};
use crate::QueueError;
use crate::machine::{self, PendingEvent};
use crate::notify::NotificationKind;
use crate::store::Database;

const FOLD_POSTGRES: &str = "UPDATE jobs SET completed_event_id = nextval('job_events_id_seq') \
     WHERE id = $1 RETURNING completed_event_id";

/// SQLite hands out AUTOINCREMENT ids from `sqlite_sequence`; drawing one there keeps every
/// later event's id above it, as an insert would.
const DRAW_SQLITE: &str =
    "UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'job_events' RETURNING seq";
const FOLD_SQLITE: &str = "UPDATE jobs SET completed_event_id = $2 WHERE id = $1";

const FOLDED: &str = "SELECT completed_event_id FROM jobs WHERE id = $1";
const UNFOLD: &str = "UPDATE jobs SET completed_event_id = NULL WHERE id = $1";

const WRITE_OUT_POSTGRES: &str = "INSERT INTO job_events \
     (id, job_id, kind, level, message, payload, created_at) OVERRIDING SYSTEM VALUE \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
const WRITE_OUT_SQLITE: &str = "INSERT INTO job_events \
     (id, job_id, kind, level, message, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";

const FOLDED_JOB: &str = concat!(
    "SELECT ",
    job_columns!(),
    ", completed_event_id FROM jobs WHERE id = $1"
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

/// Whether a transition of `job`, as it was read, may be written by a lock-free swap: not
/// when it succeeded, since its success may be kept in its row, which only a write under
/// the lock writes out first ([`Tx::write_out_completion`]).
pub(crate) fn swappable(job: &Job) -> bool {
    job.status != JobState::Succeeded
}

impl Tx {
    /// Keeps `job`'s success in its row: draws the event's id and announces it as an
    /// appended event would be.
    pub(crate) async fn fold_completion(&mut self, job: &JobId) -> Result<i64, QueueError> {
        let id = Arg::Id(job.uuid());
        let event_id: i64 = match &mut self.conn {
            TxConn::Postgres(t) => {
                pg_rows(t, FOLD_POSTGRES, &[id], |r| r.try_get("completed_event_id"))
                    .await?
                    .into_iter()
                    .next()
                    .ok_or(sqlx::Error::RowNotFound)?
            }
            TxConn::Sqlite(t) => {
                let drawn: i64 = sqlite_rows(t, DRAW_SQLITE, &[], |r| r.try_get("seq"))?
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

    /// Before a write changes `job`, which the caller locked as it is: a success kept in
    /// its row becomes an event row under its own id, as it reads.
    pub(crate) async fn write_out_completion(&mut self, job: &Job) -> Result<(), QueueError> {
        if job.status != JobState::Succeeded {
            return Ok(());
        }
        let id = [Arg::Id(job.id.uuid())];
        let folded: Vec<Option<i64>> = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, FOLDED, &id, |r| r.try_get("completed_event_id"))?,
            TxConn::Postgres(t) => {
                pg_rows(t, FOLDED, &id, |r| r.try_get("completed_event_id")).await?
            }
        };
        let Some(Some(event_id)) = folded.into_iter().next() else {
            return Ok(());
        };
        let event = rebuilt(job, event_id);
        let args = [
            Arg::BigInt(event_id),
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
        self.execute(UNFOLD, &id).await
    }
}

impl Database {
    /// The job as it is, with the id of the success its row keeps, if it keeps one.
    pub(crate) async fn folded_job(&self, job: Uuid) -> Result<Option<(Job, i64)>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(FOLDED_JOB).bind(Id(job)).fetch_optional(p).await?;
            let Some(row) = row else { return Ok(None) };
            let folded: Option<i64> = row.try_get("completed_event_id")?;
            match folded {
                Some(id) => Ok(Some((job_from_row!(&row)?, id))),
                None => Ok(None),
            }
        })
    }
}

/// The success `job`'s row keeps under `event_id`, as the completion built it.
pub(crate) fn rebuilt(job: &Job, event_id: i64) -> JobEvent {
    let at = job.finished_at.unwrap_or(job.updated_at);
    machine::completed_event(job).stored(&job.id, event_id, at)
}
