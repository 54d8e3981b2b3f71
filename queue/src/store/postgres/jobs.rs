//! A job's row: created with its first events, locked and saved many at once, and written
//! back only if unchanged.

use chrono::{DateTime, Utc};
use contract::{Job, JobEvent};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Postgres, Row};
use uuid::Uuid;

use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::jobs::{control_args, created_args, state_args};
use crate::store::{Arg, Ts, bind_pg, int};

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
    " FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE"
);

/// `SAVE_JOB` for many rows: one array per column, zipped by `unnest`.
const SAVE_JOBS_POSTGRES: &str = "UPDATE jobs AS j SET status = u.status, attempt = u.attempt, \
     next_attempt_at = u.next_attempt_at, claimed_by = u.claimed_by, \
     lease_expires_at = u.lease_expires_at, cancel_requested_at = u.cancel_requested_at, \
     cancel_requested_by_user_id = u.cancel_requested_by_user_id, \
     cancel_reason = u.cancel_reason, result_summary = u.result_summary, \
     error_message = u.error_message, started_at = u.started_at, \
     finished_at = u.finished_at, updated_at = u.updated_at, \
     pause_requested = u.pause_requested, resume_from = u.resume_from, approval = u.approval \
     FROM unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[], $5::text[], \
       $6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[], $10::text[], $11::text[], \
       $12::timestamptz[], $13::timestamptz[], $14::timestamptz[], $15::jsonb[], $16::jsonb[], \
       $17::jsonb[]) \
       AS u(id, status, attempt, next_attempt_at, claimed_by, lease_expires_at, \
       cancel_requested_at, cancel_requested_by_user_id, cancel_reason, result_summary, \
       error_message, started_at, finished_at, updated_at, pause_requested, resume_from, \
       approval) \
     WHERE j.id = u.id";

/// `SAVE_JOB` guarded by the row's previous state (`$15`..`$27`, the same columns), with
/// the transition's events (`$28`..`$31` arrays, `$32` the time) appended in the same
/// statement; the control columns come last (`$33`..`$35` new; `$36`..`$38` as read). See
/// [`write_job_if_unchanged`].
const SWAP_JOB_POSTGRES: &str = "WITH updated AS (\
       UPDATE jobs SET status = $2, attempt = $3, next_attempt_at = $4, claimed_by = $5, \
         lease_expires_at = $6, cancel_requested_at = $7, cancel_requested_by_user_id = $8, \
         cancel_reason = $9, result_summary = $10, error_message = $11, started_at = $12, \
         finished_at = $13, updated_at = $14, pause_requested = $33, resume_from = $34, \
         approval = $35 \
       WHERE id = $1 AND (status, attempt, next_attempt_at, claimed_by, lease_expires_at, \
         cancel_requested_at, cancel_requested_by_user_id, cancel_reason, result_summary, \
         error_message, started_at, finished_at, updated_at, pause_requested, resume_from, \
         approval) \
         IS NOT DISTINCT FROM ($15::text, $16::int, $17::timestamptz, $18::text, \
         $19::timestamptz, $20::timestamptz, $21::text, $22::text, $23::text, $24::text, \
         $25::timestamptz, $26::timestamptz, $27::timestamptz, $36::jsonb, $37::jsonb, $38::jsonb) \
       RETURNING id), \
     appended AS (\
       INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
       SELECT updated.id, e.kind, e.level, e.message, e.payload, $32 \
       FROM updated, unnest($28::text[], $29::text[], $30::text[], $31::jsonb[]) \
         WITH ORDINALITY AS e(kind, level, message, payload, n) \
       ORDER BY e.n \
       RETURNING id) \
     SELECT (SELECT count(*) FROM updated) AS updated, \
       ARRAY(SELECT id FROM appended ORDER BY id) AS event_ids";

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

/// Writes `new` over the row only if the row still equals `old` in every field a transition
/// may change, and appends `events` in the same statement. `None` when the row changed
/// meanwhile (nothing written); otherwise the new event ids, in order. The update takes the
/// row lock before the insert draws its ids (the insert reads the update's output), so a
/// job's event ids still become visible in order.
pub(crate) async fn write_job_if_unchanged(
    pool: &PgPool,
    old: &Job,
    new: &Job,
    events: &[PendingEvent],
    now: DateTime<Utc>,
) -> Result<Option<Vec<i64>>, QueueError> {
    let mut args = vec![Arg::Id(new.id.uuid())];
    args.extend(state_args(new));
    args.extend(state_args(old));
    let controls: Vec<Arg<'_>> = control_args(new)?
        .into_iter()
        .chain(control_args(old)?)
        .collect();
    let mut conn = pool.acquire().await?;
    let query = bind_events(bind_pg(sqlx::query(SWAP_JOB_POSTGRES), &args), events).bind(Ts(now));
    let row = bind_pg(query, &controls).fetch_one(&mut *conn).await?;
    let updated: i64 = row.try_get("updated")?;
    if updated == 0 {
        return Ok(None);
    }
    Ok(Some(row.try_get("event_ids")?))
}

/// The jobs among `ids` that exist, locked in id order, so two transactions locking
/// overlapping sets cannot deadlock.
pub(crate) async fn lock_jobs(t: &mut PgConnection, ids: &[Uuid]) -> Result<Vec<Job>, QueueError> {
    let rows = sqlx::query(LOCK_JOBS_POSTGRES)
        .bind(ids)
        .fetch_all(t)
        .await?;
    Ok(rows
        .iter()
        .map(|r| job_from_row!(r))
        .collect::<Result<_, _>>()?)
}

/// Saves several jobs' changed fields in one statement.
pub(crate) async fn save_jobs(t: &mut PgConnection, jobs: &[&Job]) -> Result<(), QueueError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&Job) -> Option<String>| jobs.iter().map(|j| f(j)).collect::<Vec<_>>();
    let at = |f: fn(&Job) -> Option<DateTime<Utc>>| jobs.iter().map(|j| f(j)).collect::<Vec<_>>();
    let ids: Vec<_> = jobs.iter().map(|j| j.id.uuid()).collect();
    sqlx::query(SAVE_JOBS_POSTGRES)
        .bind(ids)
        .bind(column(|j| Some(j.status.as_str().to_string())))
        .bind(jobs.iter().map(|j| int(j.attempt)).collect::<Vec<_>>())
        .bind(at(|j| Some(j.next_attempt_at)))
        .bind(column(|j| j.claimed_by.clone()))
        .bind(at(|j| j.lease_expires_at))
        .bind(at(|j| j.cancel_requested_at))
        .bind(column(|j| j.cancel_requested_by_user_id.clone()))
        .bind(column(|j| j.cancel_reason.clone()))
        .bind(column(|j| j.result_summary.clone()))
        .bind(column(|j| j.error_message.clone()))
        .bind(at(|j| j.started_at))
        .bind(at(|j| j.finished_at))
        .bind(at(|j| Some(j.updated_at)))
        .bind(
            jobs.iter()
                .map(|j| j.pause_requested.as_ref().map(Json))
                .collect::<Vec<_>>(),
        )
        .bind(
            jobs.iter()
                .map(|j| j.resume_from.as_ref().map(Json))
                .collect::<Vec<_>>(),
        )
        .bind(
            jobs.iter()
                .map(|j| j.approval.as_ref().map(Json))
                .collect::<Vec<_>>(),
        )
        .execute(t)
        .await?;
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
