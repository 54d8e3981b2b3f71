//! The jobs table: a job's row, created, locked, written back, swapped, listed.

use chrono::{DateTime, Utc};
use contract::{Job, JobEvent, JobState};
use sqlx::Row;
use uuid::Uuid;

use super::postgres;
use super::sqlite::RowExt;
use super::{Arg, Id, Ts, Tx, TxConn, int, sqlite_rows};
use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::{Database, PgDb};
use crate::store::{Swap, Swapped};

/// The fields a transition may change, in the order of `$2`..`$14` of [`SAVE_JOB`] and
/// [`INSERT_JOB`].
pub(super) fn state_args(job: &Job) -> [Arg<'_>; 13] {
    [
        Arg::text(job.status.as_str()),
        Arg::Int(int(job.attempt)),
        Arg::at(job.next_attempt_at),
        Arg::opt(&job.claimed_by),
        Arg::Ts(job.lease_expires_at),
        Arg::Ts(job.cancel_requested_at),
        Arg::opt(&job.cancel_requested_by_user_id),
        Arg::opt(&job.cancel_reason),
        Arg::opt(&job.result_summary),
        Arg::opt(&job.error_message),
        Arg::Ts(job.started_at),
        Arg::Ts(job.finished_at),
        Arg::at(job.updated_at),
    ]
}

/// The fields a transition may change besides those of [`state_args`], added after them:
/// `$15`..`$17` of [`SAVE_JOB`]. A new job has none, so [`INSERT_JOB`] leaves them NULL.
pub(super) fn control_args(job: &Job) -> Result<[Arg<'static>; 3], sqlx::Error> {
    Ok([
        Arg::json_opt(job.pause_requested.as_ref())?,
        Arg::json_opt(job.resume_from.as_ref())?,
        Arg::json_opt(job.approval.as_ref())?,
    ])
}

/// The fields only a new job sets, in the order of `$15`..`$23` of [`INSERT_JOB`].
pub(super) fn created_args<'a>(
    job: &'a Job,
    repository: &'a str,
) -> Result<[Arg<'a>; 9], sqlx::Error> {
    Ok([
        Arg::text(&job.job_type),
        Arg::Int(job.priority),
        Arg::json(&job.payload)?,
        Arg::opt(&job.affinity_key),
        Arg::json(&job.required_capabilities)?,
        Arg::opt(&job.created_by_user_id),
        Arg::Int(int(job.max_attempts)),
        Arg::at(job.created_at),
        Arg::text(repository),
    ])
}

const LOCK_JOB_SQLITE: &str = concat!(
    "SELECT ",
    job_columns!(),
    ", ",
    kept_columns!(),
    " FROM jobs WHERE id = $1"
);

const INSERT_JOB: &str = insert_job_sql!();

const SAVE_JOB: &str = "UPDATE jobs SET status = $2, attempt = $3, next_attempt_at = $4, \
     claimed_by = $5, lease_expires_at = $6, cancel_requested_at = $7, \
     cancel_requested_by_user_id = $8, cancel_reason = $9, result_summary = $10, \
     error_message = $11, started_at = $12, finished_at = $13, updated_at = $14, \
     pause_requested = $15, resume_from = $16, approval = $17 \
     WHERE id = $1";

/// The filter of a job listing, already parsed.
pub(crate) struct ListSql<'a> {
    pub status: Option<JobState>,
    pub job_type: Option<&'a str>,
    pub before: Option<Uuid>,
    pub limit: i64,
}

impl Tx {
    /// The job, locked until commit: `FOR UPDATE` on PostgreSQL; on SQLite the IMMEDIATE
    /// transaction already excludes every other writer. What its row keeps of its timeline
    /// is remembered, for a save that changes it to write out first (`kept.rs`).
    pub(crate) async fn lock_job(&mut self, id: Uuid) -> Result<Option<Job>, QueueError> {
        Ok(self.lock_jobs(&[id]).await?.pop())
    }

    pub(crate) async fn insert_job(
        &mut self,
        job: &Job,
        repository: &str,
    ) -> Result<(), QueueError> {
        let mut args = vec![Arg::Id(job.id.uuid())];
        args.extend(state_args(job));
        args.extend(created_args(job, repository)?);
        self.execute(INSERT_JOB, &args).await
    }

    /// Writes back every field a transition may change.
    pub(crate) async fn save_job(&mut self, job: &Job) -> Result<(), QueueError> {
        let mut args = vec![Arg::Id(job.id.uuid())];
        args.extend(state_args(job));
        args.extend(control_args(job)?);
        self.execute(SAVE_JOB, &args).await
    }

    /// Writes the job's task (`payload`): steps appended, which no transition does.
    pub(crate) async fn save_payload(&mut self, job: &Job) -> Result<(), QueueError> {
        self.write_out_changed(&[job]).await?;
        let args = [Arg::Id(job.id.uuid()), Arg::json(&job.payload)?];
        self.execute("UPDATE jobs SET payload = $2 WHERE id = $1", &args)
            .await
    }

    /// The jobs among `ids` that exist, each locked until commit (on PostgreSQL in id
    /// order, so two transactions locking overlapping sets cannot deadlock).
    pub(crate) async fn lock_jobs(&mut self, ids: &[Uuid]) -> Result<Vec<Job>, QueueError> {
        let locked = match &mut self.conn {
            TxConn::Sqlite(t) => {
                let mut locked = Vec::with_capacity(ids.len());
                for id in ids {
                    let args = [Arg::Id(*id)];
                    locked.extend(sqlite_rows(t, LOCK_JOB_SQLITE, &args, |r| {
                        Ok((job_from_row!(r)?, kept_from_row!(r)?))
                    })?);
                }
                locked
            }
            TxConn::Postgres(t) => postgres::lock_jobs(t, ids).await?,
        };
        let mut jobs = Vec::with_capacity(locked.len());
        for (job, kept) in locked {
            self.locked(&job, kept);
            jobs.push(job);
        }
        Ok(jobs)
    }

    /// [`save_job`](Self::save_job) for several jobs; one statement on PostgreSQL.
    /// What their rows keep and the save changes is written out first (`kept.rs`).
    pub(crate) async fn save_jobs(&mut self, jobs: &[&Job]) -> Result<(), QueueError> {
        self.write_out_changed(jobs).await?;
        if let TxConn::Postgres(t) = &mut self.conn {
            return postgres::save_jobs(t, jobs).await;
        }
        for job in jobs {
            self.save_job(job).await?;
        }
        Ok(())
    }
}

impl Database {
    /// How many jobs are in each state (states with none left out).
    pub(crate) async fn count_by_status(&self) -> Result<Vec<(String, i64)>, sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query_as("SELECT status, COUNT(*) FROM jobs GROUP BY status")
                .fetch_all(p)
                .await
        })
    }
}

// Writes that need no row lock beforehand: on PostgreSQL each is one statement outside an
// explicit transaction, which saves the BEGIN and COMMIT round trips; on SQLite a
// transaction on the writer, which costs no round trip at all.
impl Database {
    /// Inserts a new job with its first events (stamped with its creation time),
    /// atomically; returns the stored events, in order.
    pub(crate) async fn create_job(
        &self,
        job: &Job,
        repository: &str,
        events: &[PendingEvent],
    ) -> Result<Vec<JobEvent>, QueueError> {
        if let Database::Postgres(PgDb { pool, .. }) = self {
            return postgres::create_job(pool, job, repository, events).await;
        }
        let mut tx = Tx::begin(self).await?;
        tx.insert_job(job, repository).await?;
        let mut stored = Vec::with_capacity(events.len());
        for event in events {
            stored.push(tx.insert_event(&job.id, event, job.created_at).await?);
        }
        tx.commit().await?;
        Ok(stored)
    }

    /// PostgreSQL: writes `swap.new` over the row only if the row still equals `swap.old`
    /// in every field a transition may change, and appends its events in the same
    /// statement, which concurrent swaps share (see `postgres::swap_committer`). `None`
    /// when the row changed meanwhile (nothing written); otherwise the new event ids, in
    /// order.
    pub(crate) async fn write_job_if_unchanged(&self, swap: Swap) -> Result<Swapped, QueueError> {
        let Database::Postgres(db) = self else {
            unreachable!("a PostgreSQL path; SQLite transitions hold the write lock")
        };
        db.swaps.write(swap).await
    }

    /// PostgreSQL: several swaps in one statement of their own, for a caller whose writes
    /// already come as a batch (the committer's line would split them). One answer per
    /// swap, in order; two swaps of one job must not share the batch.
    pub(crate) async fn write_jobs_if_unchanged(
        &self,
        swaps: &[&Swap],
    ) -> Result<Vec<Swapped>, QueueError> {
        let Database::Postgres(db) = self else {
            unreachable!("a PostgreSQL path; SQLite transitions hold the write lock")
        };
        postgres::write_on(&db.pool, swaps).await
    }

    pub(crate) async fn get_job(&self, id: Uuid) -> Result<Option<Job>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"))
                .bind(Id(id))
                .fetch_optional(p)
                .await?;
            row.map(|row| job_from_row!(&row)).transpose()
        })
    }

    /// Newest first. The WHERE clause is built for the filters actually given, so each
    /// combination is a plain indexed range scan rather than a `$n IS NULL OR …` plan.
    pub(crate) async fn list_jobs(&self, filter: &ListSql<'_>) -> Result<Vec<Job>, sqlx::Error> {
        on_pool!(self, p => {
            let mut query = sqlx::QueryBuilder::new(concat!("SELECT ", job_columns!(), " FROM jobs"));
            let mut and = " WHERE ";
            if let Some(status) = filter.status {
                query.push(and).push("status = ").push_bind(status.as_str());
                and = " AND ";
            }
            if let Some(job_type) = filter.job_type {
                query.push(and).push("job_type = ").push_bind(job_type);
                and = " AND ";
            }
            if let Some(before) = filter.before {
                query.push(and).push("id < ").push_bind(Id(before));
            }
            query.push(" ORDER BY id DESC LIMIT ").push_bind(filter.limit);
            let rows = query.build().fetch_all(p).await?;
            rows.iter().map(|row| job_from_row!(row)).collect()
        })
    }

    /// Running jobs whose lease ran out, longest-expired first.
    pub(crate) async fn expired_leases(
        &self,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Uuid>, sqlx::Error> {
        on_pool!(self, p => {
            let ids: Vec<Id> = sqlx::query_scalar(
                "SELECT id FROM jobs WHERE status = 'running' AND lease_expires_at < $1 \
                 ORDER BY lease_expires_at LIMIT $2",
            )
            .bind(Ts(now))
            .bind(limit)
            .fetch_all(p)
            .await?;
            Ok(ids.into_iter().map(|id| id.0).collect())
        })
    }
}
