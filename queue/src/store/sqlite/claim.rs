//! SQLite's claim: one UPDATE on the writer, then each claim's `job.claimed` kept in its
//! row.

use contract::{Job, JobEvent};

use super::{DRAW_EVENT_IDS, RowExt};
use crate::QueueError;
use crate::machine;
use crate::store::SqliteDb;
use crate::store::claim_sql::{ClaimSql, claim_args, claim_order};
use crate::store::{Arg, sqlite_rows};

/// SQLite: the statement runs inside `BEGIN IMMEDIATE`, and SQLite admits one writer at a
/// time, so no other claim can run between the subquery's pick and the update.
/// INDEXED BY: left to itself SQLite may pick an index of the state and sort every queued row (a
/// temp B-tree per claim, so claims slow down as the queue grows); walking
/// jobs_claim_order stops at the first claimable job. `$extra` is one more condition on
/// the candidate row, `j`.
macro_rules! claim_sqlite_sql {
    ($extra:literal) => {
        concat!(
            "UPDATE jobs SET status = 'running', claimed_by = $1, lease_expires_at = $2, \
         attempt = attempt + 1, started_at = COALESCE(started_at, $3), updated_at = $3, \
         claimed_at = $3, claim_lease_until = $2 \
         WHERE id IN (\
           SELECT j.id FROM jobs j INDEXED BY jobs_claim_order \
           WHERE j.status = 'queued' AND j.next_attempt_at <= $3 \
             AND j.cancel_requested_at IS NULL \
             AND NOT EXISTS (\
               SELECT 1 FROM json_each(j.required_capabilities) AS r \
               WHERE r.value NOT IN (SELECT value FROM json_each($4))) \
             AND ($5 IS NULL OR j.job_type IN (SELECT value FROM json_each($5))) \
             AND ($6 IS NULL OR j.repository IN (SELECT value FROM json_each($6))) ",
            $extra,
            " ORDER BY j.priority DESC, j.created_at, j.id \
           LIMIT $7) \
         AND status = 'queued' \
         RETURNING ",
            job_columns!()
        )
    };
}

const CLAIM_SQLITE: &str = claim_sqlite_sql!("");

/// [`CLAIM_SQLITE`] that also skips a job whose repository has `$8` jobs running already.
/// The one writer makes the count exact.
const CLAIM_SQLITE_LIMITED: &str = claim_sqlite_sql!(
    "AND (SELECT count(*) FROM jobs r INDEXED BY jobs_running \
          WHERE r.repository = j.repository AND r.status = 'running') < $8"
);

/// Keeps a claimed job's `job.claimed` in its row under the id drawn for it.
const KEEP_CLAIM_SQLITE: &str = "UPDATE jobs SET claimed_event_id = $2 WHERE id = $1";

/// [`CLAIM_SQLITE`], then the claims' `job.claimed` kept in their rows (`kept.rs`) under
/// ids drawn in claim order, in one transaction on the writer.
pub(crate) async fn claim(
    db: &SqliteDb,
    claim: &ClaimSql<'_>,
) -> Result<Vec<(Job, JobEvent)>, QueueError> {
    let t = db.writer.begin().await?;
    let mut args = claim_args(claim)?;
    let mut jobs = match claim.repository_limit {
        None => sqlite_rows(&t, CLAIM_SQLITE, &args, |r| job_from_row!(r))?,
        Some(limit) => {
            // One job per statement, so that each counts the claims before it: a batch
            // never takes two jobs of a repository with room for one.
            args[6] = Arg::BigInt(1);
            args.push(Arg::BigInt(i64::from(limit)));
            let mut jobs = Vec::new();
            for _ in 0..claim.limit {
                let one = sqlite_rows(&t, CLAIM_SQLITE_LIMITED, &args, |r| job_from_row!(r))?;
                if one.is_empty() {
                    break;
                }
                jobs.extend(one);
            }
            jobs
        }
    };
    if jobs.is_empty() {
        t.rollback()?;
        return Ok(Vec::new());
    }
    // RETURNING follows no order; callers get the claim order.
    jobs.sort_by(claim_order);
    let n = i64::try_from(jobs.len()).unwrap_or(i64::MAX);
    let last: i64 = sqlite_rows(&t, DRAW_EVENT_IDS, &[Arg::BigInt(n)], |r| r.try_get("seq"))?
        .into_iter()
        .next()
        .ok_or(sqlx::Error::RowNotFound)?;
    let mut claimed = Vec::with_capacity(jobs.len());
    for (event_id, job) in (last - n + 1..).zip(jobs) {
        let args = [Arg::Id(job.id.uuid()), Arg::BigInt(event_id)];
        sqlite_rows(&t, KEEP_CLAIM_SQLITE, &args, |_| Ok(()))?;
        let event =
            machine::claimed_event(&job, job.lease_expires_at).stored(&job.id, event_id, claim.now);
        claimed.push((job, event));
    }
    t.commit().await?;
    Ok(claimed)
}
