//! A job's row: created with its first events, locked and saved many at once, and written
//! back only if unchanged.

use contract::{Job, JobEvent};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Postgres, Row};
use uuid::Uuid;

use super::swaps::bind_states;
use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::jobs::{created_args, state_args};
use crate::store::{Arg, Kept, bind_pg};

/// PostgreSQL: the job and its first events (`$24`..`$27` arrays, inserted in their order)
/// in one statement, run outside an explicit transaction (a statement is atomic on its
/// own): one round trip instead of four.
const INSERT_JOB_WITH_EVENTS_POSTGRES: &str = concat!(
    "WITH job AS (",
    insert_job_sql!(),
    " RETURNING id) INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
     SELECT job.id, e.kind, e.level, e.message, e.payload, $22 \
     FROM job, unnest($24::text[], $25::text[], $26::text[], $27::jsonb[]) \
       WITH ORDINALITY AS e(kind, level, message, payload, n) \
     ORDER BY e.n RETURNING id"
);

const LOCK_JOBS_POSTGRES: &str = concat!(
    "SELECT ",
    job_columns!(),
    ", ",
    kept_columns!(),
    " FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE"
);

/// `SAVE_JOB` for many rows: one array per column (in the order of `bind_states`), zipped
/// by `unnest`.
const SAVE_JOBS_POSTGRES: &str = concat!(
    "UPDATE jobs AS j SET ",
    set_states_from_u!(),
    " FROM unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[], $5::text[], \
       $6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[], $10::text[], $11::text[], \
       $12::timestamptz[], $13::timestamptz[], $14::timestamptz[], $15::jsonb[], $16::jsonb[], \
       $17::jsonb[]) \
       AS u(id, status, attempt, next_attempt_at, claimed_by, lease_expires_at, \
       cancel_requested_at, cancel_requested_by_user_id, cancel_reason, result_summary, \
       error_message, started_at, finished_at, updated_at, pause_requested, resume_from, \
       approval) \
     WHERE j.id = u.id"
);

/// Inserts a new job with its first events (stamped with its creation time) in one
/// statement; returns the stored events, in order.
pub(crate) async fn create_job(
    pool: &PgPool,
    job: &Job,
    repository: &str,
    events: &[PendingEvent],
) -> Result<Vec<JobEvent>, QueueError> {
    let mut args = vec![Arg::Id(job.id.uuid())];
    args.extend(state_args(job));
    args.extend(created_args(job, repository)?);
    let mut conn = pool.acquire().await?;
    let rows = bind_events(
        bind_pg(sqlx::query(INSERT_JOB_WITH_EVENTS_POSTGRES), &args),
        events,
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut ids = rows
        .iter()
        .map(|r| r.try_get::<i64, _>("id"))
        .collect::<Result<Vec<_>, _>>()?;
    // RETURNING follows no order; the ids were drawn in the events' order.
    ids.sort_unstable();
    if ids.len() != events.len() {
        return Err(sqlx::Error::RowNotFound.into());
    }
    Ok(events
        .iter()
        .zip(ids)
        .map(|(event, id)| event.stored(&job.id, id, job.created_at))
        .collect())
}

/// The jobs among `ids` that exist, locked in id order, so two transactions locking
/// overlapping sets cannot deadlock; each with what its row keeps of its timeline.
pub(crate) async fn lock_jobs(
    t: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<(Job, Kept)>, QueueError> {
    let rows = sqlx::query(LOCK_JOBS_POSTGRES)
        .bind(ids)
        .fetch_all(t)
        .await?;
    Ok(rows
        .iter()
        .map(|r| Ok((job_from_row!(r)?, kept_from_row!(r)?)))
        .collect::<Result<_, sqlx::Error>>()?)
}

/// Saves several jobs' changed fields in one statement.
pub(crate) async fn save_jobs(t: &mut PgConnection, jobs: &[&Job]) -> Result<(), QueueError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let ids: Vec<_> = jobs.iter().map(|j| j.id.uuid()).collect();
    let query = sqlx::query(SAVE_JOBS_POSTGRES).bind(ids);
    bind_states(query, jobs.iter().copied())?.execute(t).await?;
    Ok(())
}

/// Binds `events` as the four arrays (kinds, levels, messages, payloads) that a statement
/// unnests in order, after the arguments already bound.
fn bind_events<'q>(
    query: Query<'q, Postgres, PgArguments>,
    events: &'q [PendingEvent],
) -> Query<'q, Postgres, PgArguments> {
    let text = |f: fn(&PendingEvent) -> &str| events.iter().map(f).collect::<Vec<_>>();
    query
        .bind(text(|e| &e.kind))
        .bind(text(|e| e.level.as_str()))
        .bind(text(|e| &e.message))
        .bind(events.iter().map(|e| Json(&e.payload)).collect::<Vec<_>>())
}
