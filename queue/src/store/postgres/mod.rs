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

mod artifacts;
mod claims;
mod committer;
mod events;
mod jobs;
mod swaps;

pub(super) use artifacts::{read_artifact_chunks, replace_artifact_chunks};
pub(super) use claims::{Claim, Claimed, claim, claim_committer};
pub(super) use committer::{Committer, IN_FLIGHT};
pub(super) use events::insert_events;
pub(super) use jobs::{create_job, lock_jobs, save_jobs};
pub(super) use swaps::write_jobs_if_unchanged;
pub(crate) use swaps::{Swap, Swapped};

use sqlx::PgPool;

/// The line that concurrent swaps wait in to share a statement: two swaps of one job never
/// share one. A batch that fails is written again one swap at a time, so that each gets
/// its own answer (one row that breaks a constraint fails only its own write).
pub(super) fn swap_committer(pool: PgPool) -> Committer<Swap, Swapped> {
    Committer::new(
        pool,
        |swap: &Swap| Some(swap.new.id.uuid()),
        |pool, swaps| async move {
            let all: Vec<&Swap> = swaps.iter().collect();
            match swaps::write_jobs_if_unchanged(&pool, &all).await {
                Ok(answers) => answers.into_iter().map(Ok).collect(),
                Err(error) if swaps.len() == 1 => vec![Err(error)],
                Err(_) => {
                    let mut answers = Vec::with_capacity(swaps.len());
                    for swap in &swaps {
                        let one = swaps::write_jobs_if_unchanged(&pool, &[swap]).await;
                        answers.push(one.map(|mut answer| answer.pop().flatten()));
                    }
                    answers
                }
            }
        },
    )
}
