//! A job's row: created with its first events, locked and saved many at once, and written
//! back only if unchanged.

use contract::{Job, JobEvent};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Postgres, Row};
use uuid::Uuid;

use super::bind_states;
use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::jobs::{created_args, state_args};
use crate::store::live::is_live;
use crate::store::{Arg, Kept, bind_pg, int};

/// PostgreSQL: the job and its first events (`$24`..`$27` arrays, inserted in their order)
/// in one statement, run outside an explicit transaction (a statement is atomic on its
/// own): one round trip instead of four.
/// A live job's live row (`live.rs`) is made in it too, from the same arguments.
const INSERT_JOB_WITH_EVENTS_POSTGRES: &str = concat!(
    "WITH job AS (",
    insert_job_sql!(),
    " RETURNING id), live AS (INSERT INTO job_queue (id, priority, created_at, job_type, \
       repository, required_capabilities, next_attempt_at, status, attempt, updated_at, \
       started_at, claimed_by, lease_expires_at) \
     SELECT $1, $16, $22, $15, $23, $19, $4, $2, $3, $14, $12, $5, $6 \
     WHERE $2 IN ('queued', 'running')) \
     INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
     SELECT job.id, e.kind, e.level, e.message, e.payload, $22 \
     FROM job, unnest($24::text[], $25::text[], $26::text[], $27::jsonb[]) \
       WITH ORDINALITY AS e(kind, level, message, payload, n) \
     ORDER BY e.n RETURNING id"
);

/// The jobs' live rows locked in id order, then their own rows (`live.rs`'s order): the
/// count of the first is an InitPlan of the second, so no job's row is locked before the
/// live rows. Both are read as locked, the latest versions, not as of the statement's
/// start.
const LOCK_JOBS_POSTGRES: &str = concat!(
    "WITH q AS MATERIALIZED (SELECT * FROM job_queue WHERE id = ANY($1) ORDER BY id \
       FOR UPDATE), \
     j AS MATERIALIZED (SELECT * FROM jobs WHERE id = ANY($1) \
       AND (SELECT count(*) FROM q) >= 0 ORDER BY id FOR UPDATE) \
     SELECT ",
    job_columns!(),
    ", ",
    kept_columns!(),
    ", q.id IS NOT NULL AS has_live, j.status AS own_status \
     FROM j LEFT JOIN q ON q.id = j.id ORDER BY j.id"
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
///
/// A job whose own row says it is live but whose live row the statement did not see had it
/// made after the statement began, by a write it waited for on the job's row: the
/// statement runs again and this time sees and locks it. It runs again from a savepoint
/// taken before the first run, which lets go of the jobs' rows first: locking the live row
/// while holding the job's would go against the order of every other write of a live job,
/// which could be holding that live row and waiting for the job's. It runs again for as
/// long as it misses one (each miss is another write that made the job live meanwhile), up
/// to [`LOCK_RUNS`]; a live row missing that often is not there to wait for (the rows
/// disagree), and the save makes it. The savepoint is left open (its release would be one
/// more round trip; the commit ends both).
pub(crate) async fn lock_jobs(
    t: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<(Job, Kept)>, QueueError> {
    sqlx::query("SAVEPOINT lock_jobs").execute(&mut *t).await?;
    for run in 0..LOCK_RUNS {
        if run > 0 {
            sqlx::query("ROLLBACK TO SAVEPOINT lock_jobs")
                .execute(&mut *t)
                .await?;
        }
        let rows = sqlx::query(LOCK_JOBS_POSTGRES)
            .bind(ids)
            .fetch_all(&mut *t)
            .await?;
        let mut missed = false;
        let mut locked = Vec::with_capacity(rows.len());
        for row in &rows {
            let own: String = row.try_get("own_status")?;
            let has_live: bool = row.try_get("has_live")?;
            let own: contract::JobState = own.parse().map_err(crate::store::decode_err)?;
            missed |= is_live(own) && !has_live;
            locked.push((job_from_row!(row)?, kept_from_row!(row)?));
        }
        if !missed || run + 1 == LOCK_RUNS {
            return Ok(locked);
        }
    }
    unreachable!("the last run returns")
}

/// How many times [`lock_jobs`] runs at most while it misses a live row.
const LOCK_RUNS: usize = 4;

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

/// `live.rs`'s `UPSERT_LIVE` for many jobs at once: `$1` their ids, `$2`..`$8` their live
/// columns, one array each.
const UPSERT_LIVE_POSTGRES: &str = "INSERT INTO job_queue (id, priority, created_at, job_type, \
     repository, required_capabilities, next_attempt_at, status, attempt, updated_at, \
     started_at, claimed_by, lease_expires_at) \
     SELECT j.id, j.priority, j.created_at, j.job_type, j.repository, j.required_capabilities, \
       u.next_attempt_at, u.status, u.attempt, u.updated_at, u.started_at, u.claimed_by, \
       u.lease_expires_at \
     FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::int[], $5::timestamptz[], \
       $6::timestamptz[], $7::text[], $8::timestamptz[]) \
       AS u(id, next_attempt_at, status, attempt, updated_at, started_at, claimed_by, \
       lease_expires_at) \
     JOIN jobs j ON j.id = u.id \
     ON CONFLICT (id) DO UPDATE SET next_attempt_at = excluded.next_attempt_at, \
       status = excluded.status, attempt = excluded.attempt, \
       updated_at = excluded.updated_at, started_at = excluded.started_at, \
       claimed_by = excluded.claimed_by, lease_expires_at = excluded.lease_expires_at";

/// The live rows of the jobs `$1` deleted, what each kept of the claim moved to its job.
const LEAVE_LIVE_POSTGRES: &str = "WITH gone AS (DELETE FROM job_queue WHERE id = ANY($1) \
       RETURNING id, claimed_event_id, claimed_at, claim_lease_until) \
     UPDATE jobs SET claimed_event_id = gone.claimed_event_id, claimed_at = gone.claimed_at, \
       claim_lease_until = gone.claim_lease_until \
     FROM gone WHERE jobs.id = gone.id AND gone.claimed_event_id IS NOT NULL";

/// `Tx::save_live` in at most two statements: the live jobs' live rows written, the others'
/// gone.
pub(crate) async fn save_live(t: &mut PgConnection, jobs: &[&Job]) -> Result<(), QueueError> {
    let (live, resting): (Vec<&Job>, Vec<&Job>) =
        jobs.iter().copied().partition(|job| is_live(job.status));
    if !live.is_empty() {
        sqlx::query(UPSERT_LIVE_POSTGRES)
            .bind(live.iter().map(|j| j.id.uuid()).collect::<Vec<_>>())
            .bind(live.iter().map(|j| j.next_attempt_at).collect::<Vec<_>>())
            .bind(live.iter().map(|j| j.status.as_str()).collect::<Vec<_>>())
            .bind(live.iter().map(|j| int(j.attempt)).collect::<Vec<_>>())
            .bind(live.iter().map(|j| j.updated_at).collect::<Vec<_>>())
            .bind(live.iter().map(|j| j.started_at).collect::<Vec<_>>())
            .bind(
                live.iter()
                    .map(|j| j.claimed_by.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(live.iter().map(|j| j.lease_expires_at).collect::<Vec<_>>())
            .execute(&mut *t)
            .await?;
    }
    if !resting.is_empty() {
        sqlx::query(LEAVE_LIVE_POSTGRES)
            .bind(resting.iter().map(|j| j.id.uuid()).collect::<Vec<_>>())
            .execute(&mut *t)
            .await?;
    }
    Ok(())
}
