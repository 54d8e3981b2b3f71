//! The PostgreSQL driver: what PostgreSQL does in one statement where the shared SQL takes
//! several (a create or a claim with its events, a transition written only if its row is
//! unchanged, many rows or events at once), and artifact bytes kept in the database. Each
//! saves round trips, which is what a PostgreSQL write costs. The store's per-concern files
//! call into it; SQLite, whose writes cost no round trip, runs the shared statements.

/// `SET` of every column a transition may change, from the same columns of `u`: how an
/// update writes rows given as arrays (`jobs::save_jobs`, `swaps`).
macro_rules! set_states_from_u {
    () => {
        "status = u.status, attempt = u.attempt, \
         next_attempt_at = u.next_attempt_at, claimed_by = u.claimed_by, \
         lease_expires_at = u.lease_expires_at, cancel_requested_at = u.cancel_requested_at, \
         cancel_requested_by_user_id = u.cancel_requested_by_user_id, \
         cancel_reason = u.cancel_reason, result_summary = u.result_summary, \
         error_message = u.error_message, started_at = u.started_at, \
         finished_at = u.finished_at, updated_at = u.updated_at, \
         pause_requested = u.pause_requested, resume_from = u.resume_from, \
         approval = u.approval"
    };
}

/// The claim's pick: the ids of up to `$limit` claimable jobs in claim order, each live
/// row locked `FOR UPDATE SKIP LOCKED`, so concurrent claimers each skip rows another is
/// taking, or a write under a job's lock holds, and never block on or double-claim one.
/// The lock re-checks these conditions on the row's latest version. Only live rows are
/// read (`live.rs`); a queued job never has a cancel asked (one asked of it ends it). The
/// placeholders are the statement's: when it is (`$now`), the worker's capabilities
/// (`$caps`), its allowed types and repositories (`$types`, `$repos`, NULL for any);
/// `$extra` is one more condition on the candidate row, `job_queue`.
macro_rules! claim_pick {
    ($now:literal, $caps:literal, $types:literal, $repos:literal, $limit:literal, $extra:literal) => {
        concat!(
            "SELECT id FROM job_queue WHERE status = 'queued' AND next_attempt_at <= ",
            $now,
            " AND required_capabilities <@ ",
            $caps,
            " AND (",
            $types,
            "::text[] IS NULL OR job_type = ANY(",
            $types,
            ")) AND (",
            $repos,
            "::text[] IS NULL OR repository = ANY(",
            $repos,
            ")) ",
            $extra,
            " ORDER BY priority DESC, created_at, id LIMIT ",
            $limit,
            " FOR UPDATE SKIP LOCKED"
        )
    };
}

/// `SET` of a claim, on the live row `q`: leased to `$worker` until `$lease`, at `$now`,
/// its attempt counted, its `job.claimed` kept in the row (`kept.rs`) under an id drawn
/// here, after the pick locked the row, so no event of the job committed before can have
/// a larger one.
macro_rules! claim_set {
    ($worker:literal, $lease:literal, $now:literal) => {
        concat!(
            "status = 'running', claimed_by = ",
            $worker,
            ", lease_expires_at = ",
            $lease,
            ", attempt = q.attempt + 1, started_at = COALESCE(q.started_at, ",
            $now,
            "), updated_at = ",
            $now,
            ", claimed_event_id = nextval('job_events_id_seq'), claimed_at = ",
            $now,
            ", claim_lease_until = ",
            $lease
        )
    };
}

/// The webhook outbox's notice of each success `$written` wrote, while a replica that posts
/// webhooks listens: `$written` returns each job's `id`, `completed_event_id` and
/// `finished_at`, and `$drew` says of its row `w` whether this write drew the success's id.
/// Migration 0021 made this check a trigger, a PL/pgSQL call per success that cost a fifth
/// of a lone completion's server time; made by the statement that writes the success, the
/// listeners are read once per statement (0027 drops the trigger). Every statement that
/// draws a success's id makes it: the swaps' (`swaps.rs`) and the locked path's
/// ([`FOLD_SUCCESS`]). SQLite keeps the trigger, an in-process call.
macro_rules! told_of_successes {
    ($written:literal, $drew:literal) => {
        concat!(
            "told AS (INSERT INTO webhook_outbox \
               (job_id, event_id, event, status, next_at, created_at) \
             SELECT w.id, w.completed_event_id, 'job.ended', 'succeeded', w.finished_at, \
               w.finished_at FROM ",
            $written,
            " AS w WHERE ",
            $drew,
            " AND w.finished_at - interval '10 minutes' \
               < (SELECT max(seen_at) FROM webhook_listeners))"
        )
    };
}

/// The locked path's success kept in the row (`kept.rs`): its id drawn under the lock the
/// transaction holds, told to the outbox if the row had none (what 0021's trigger read as
/// `OLD`: the statement's CTEs share its snapshot, so `was` reads the row before `updated`).
pub(crate) const FOLD_SUCCESS: &str = concat!(
    "WITH was AS (SELECT completed_event_id IS NULL AS fresh FROM jobs WHERE id = $1), \
     updated AS (UPDATE jobs SET completed_event_id = nextval('job_events_id_seq') \
       WHERE id = $1 RETURNING id, completed_event_id, finished_at), ",
    told_of_successes!("updated", "(SELECT fresh FROM was)"),
    " SELECT completed_event_id FROM updated"
);

mod artifacts;
mod claims;
mod committer;
mod events;
mod finishes;
mod jobs;
mod lent;
mod swaps;
mod vacuum;

pub(super) use artifacts::{read_artifact_chunks, replace_artifact_chunks};
pub(super) use claims::{Claim, Claimed, claim, claim_committer};
pub(super) use committer::{Committer, IN_FLIGHT};
pub(super) use events::insert_events;
pub(super) use finishes::finish_committer;
pub(crate) use finishes::{Finish, Finished};
pub(super) use jobs::{create_job, lock_jobs, save_jobs, save_live};
use lent::Lent;
pub(crate) use swaps::{Swap, Swapped};
pub(crate) use vacuum::LiveDead;
pub(super) use vacuum::{live_dead, vacuum_live};

use chrono::{DateTime, Utc};
use contract::Job;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgPool, Postgres};

use crate::QueueError;
use crate::store::int;

/// The line that concurrent swaps wait in to share a statement: two swaps of one job never
/// share one. A batch that fails is written again one swap at a time, so that each gets
/// its own answer (one row that breaks a constraint fails only its own write).
pub(super) fn swap_committer(pool: PgPool) -> Committer<Swap, Swapped> {
    Committer::new(
        pool,
        |swap: &Swap| Some(swap.new.id.uuid()),
        |mut lent, swaps| async move {
            let all: Vec<&Swap> = swaps.iter().collect();
            let answers = match write_on(&mut lent, &all).await {
                Ok(answers) => answers.into_iter().map(Ok).collect(),
                Err(error) if swaps.len() == 1 => vec![Err(error)],
                Err(_) => {
                    let mut answers = Vec::with_capacity(swaps.len());
                    for swap in &swaps {
                        let one = write_on(&mut lent, &[swap]).await;
                        answers.push(one.map(|mut answer| answer.pop().flatten()));
                    }
                    answers
                }
            };
            (lent, answers)
        },
    )
}

/// [`swaps::write_jobs_if_unchanged`] on the swap line's connection, outside a transaction.
async fn write_on(lent: &mut Lent, swaps: &[&Swap]) -> Result<Vec<Swapped>, QueueError> {
    lent.run(async |conn| {
        swaps::write_jobs_if_unchanged(conn, swaps, swaps::Statements::Alone).await
    })
    .await
}

/// [`swaps::write_jobs_if_unchanged`] on a connection of `pool`, outside a transaction.
pub(super) async fn write_on_pool(
    pool: &PgPool,
    swaps: &[&Swap],
) -> Result<Vec<Swapped>, QueueError> {
    let mut conn = pool.acquire().await?;
    swaps::write_jobs_if_unchanged(&mut conn, swaps, swaps::Statements::Alone).await
}

/// Binds the sixteen columns a transition may change, one array each, in the order of
/// `state_columns!` (`swaps.rs`) and of [`set_states_from_u!`].
pub(super) fn bind_states<'q, 'j>(
    query: Query<'q, Postgres, PgArguments>,
    jobs: impl Iterator<Item = &'j Job> + Clone,
) -> Result<Query<'q, Postgres, PgArguments>, QueueError> {
    let text = |f: fn(&Job) -> Option<String>| jobs.clone().map(f).collect::<Vec<_>>();
    let at = |f: fn(&Job) -> Option<DateTime<Utc>>| jobs.clone().map(f).collect::<Vec<_>>();
    let json = |f: fn(&Job) -> Option<serde_json::Result<serde_json::Value>>| {
        jobs.clone()
            .map(|j| f(j).transpose().map(|v| v.map(Json)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| QueueError::from(crate::store::decode_err(e)))
    };
    Ok(query
        .bind(text(|j| Some(j.status.as_str().to_string())))
        .bind(jobs.clone().map(|j| int(j.attempt)).collect::<Vec<_>>())
        .bind(at(|j| Some(j.next_attempt_at)))
        .bind(text(|j| j.claimed_by.clone()))
        .bind(at(|j| j.lease_expires_at))
        .bind(at(|j| j.cancel_requested_at))
        .bind(text(|j| j.cancel_requested_by_user_id.clone()))
        .bind(text(|j| j.cancel_reason.clone()))
        .bind(text(|j| j.result_summary.clone()))
        .bind(text(|j| j.error_message.clone()))
        .bind(at(|j| j.started_at))
        .bind(at(|j| j.finished_at))
        .bind(at(|j| Some(j.updated_at)))
        .bind(json(|j| {
            j.pause_requested.as_ref().map(serde_json::to_value)
        })?)
        .bind(json(|j| j.resume_from.as_ref().map(serde_json::to_value))?)
        .bind(json(|j| j.approval.as_ref().map(serde_json::to_value))?))
}

/// A migrated scratch database for this driver's tests, its `Database` and its pool;
/// `ScratchPostgres::drop_database` removes it.
#[cfg(test)]
pub(super) async fn scratch(prefix: &str) -> (crate::ScratchPostgres, super::Database, PgPool) {
    let admin = std::env::var("STEPWISE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let scratch = crate::ScratchPostgres::create(&admin, prefix)
        .await
        .unwrap();
    let db = super::Database::open_url(scratch.url()).await.unwrap();
    crate::migrate::run(&db).await.unwrap();
    let super::Database::Postgres(super::PgDb { pool, .. }) = &db else {
        unreachable!("a postgres URL opens PostgreSQL")
    };
    let pool = pool.clone();
    (scratch, db, pool)
}

/// `n` queued jobs, each with its live row, created a millisecond apart (so in claim order),
/// written behind the queue's back for a test of what the claim reads.
#[cfg(test)]
pub(super) async fn queued_jobs(pool: &PgPool, n: i64) {
    sqlx::query(
        "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
         required_capabilities, max_attempts, next_attempt_at, created_at, updated_at) \
         SELECT gen_random_uuid(), 'task', 'queued', 0, '{}', 'o/r', '[\"codex\"]', 3, \
         now(), now() + g * interval '1 ms', now() FROM generate_series(1, $1) AS g",
    )
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO job_queue (id, priority, created_at, job_type, repository, \
         required_capabilities, next_attempt_at, status, attempt, updated_at) \
         SELECT id, priority, created_at, job_type, repository, required_capabilities, \
           next_attempt_at, status, attempt, updated_at FROM jobs",
    )
    .execute(pool)
    .await
    .unwrap();
}
