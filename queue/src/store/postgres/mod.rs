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

mod artifacts;
mod claims;
mod committer;
mod events;
mod finishes;
mod jobs;
mod swaps;

pub(super) use artifacts::{read_artifact_chunks, replace_artifact_chunks};
pub(super) use claims::{Claim, Claimed, claim, claim_committer};
pub(super) use committer::{Committer, IN_FLIGHT};
pub(super) use events::insert_events;
pub(super) use finishes::finish_committer;
pub(crate) use finishes::{Finish, Finished};
pub(super) use jobs::{create_job, lock_jobs, save_jobs, save_live};
pub(crate) use swaps::{Swap, Swapped};

use sqlx::PgPool;

use crate::QueueError;

/// The line that concurrent swaps wait in to share a statement: two swaps of one job never
/// share one. A batch that fails is written again one swap at a time, so that each gets
/// its own answer (one row that breaks a constraint fails only its own write).
pub(super) fn swap_committer(pool: PgPool) -> Committer<Swap, Swapped> {
    Committer::new(
        pool,
        |swap: &Swap| Some(swap.new.id.uuid()),
        |pool, swaps| async move {
            let all: Vec<&Swap> = swaps.iter().collect();
            match write_on(&pool, &all).await {
                Ok(answers) => answers.into_iter().map(Ok).collect(),
                Err(error) if swaps.len() == 1 => vec![Err(error)],
                Err(_) => {
                    let mut answers = Vec::with_capacity(swaps.len());
                    for swap in &swaps {
                        let one = write_on(&pool, &[swap]).await;
                        answers.push(one.map(|mut answer| answer.pop().flatten()));
                    }
                    answers
                }
            }
        },
    )
}

/// [`swaps::write_jobs_if_unchanged`] on a connection of `pool`, outside a transaction.
pub(super) async fn write_on(pool: &PgPool, swaps: &[&Swap]) -> Result<Vec<Swapped>, QueueError> {
    let mut conn = pool.acquire().await?;
    swaps::write_jobs_if_unchanged(&mut conn, swaps).await
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
