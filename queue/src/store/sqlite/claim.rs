//! SQLite's claim: one UPDATE on the writer, then each claim's `job.claimed` kept in its
//! row.

use contract::{Job, JobEvent};

use super::{DRAW_EVENT_IDS, RowExt};
use crate::QueueError;
use crate::machine;
use crate::store::SqliteDb;
use crate::store::claim_sql::{ClaimSql, claim_args, claim_order};
use crate::store::{Arg, Id, sqlite_rows};

/// SQLite: the statement runs inside `BEGIN IMMEDIATE`, and SQLite admits one writer at a
/// time, so no other claim can run between the subquery's pick and the update, which
/// writes only the live rows (`live.rs`). INDEXED BY: left to itself SQLite may pick
/// another index and sort every queued row (a temp B-tree per claim, so claims slow down
/// as the queue grows); walking job_queue_claim_order stops at the first claimable job.
/// `$extra` is one more condition on the candidate row, `c`. SQLite's RETURNING names
/// only the updated table: the jobs are read after.
macro_rules! claim_sqlite_sql {
    ($extra:literal) => {
        concat!(
            "UPDATE job_queue SET status = 'running', claimed_by = $1, lease_expires_at = $2, \
         attempt = attempt + 1, started_at = COALESCE(started_at, $3), updated_at = $3, \
         claimed_at = $3, claim_lease_until = $2 \
         WHERE id IN (\
           SELECT c.id FROM job_queue c INDEXED BY job_queue_claim_order \
           WHERE c.status = 'queued' AND c.next_attempt_at <= $3 \
             AND NOT EXISTS (\
               SELECT 1 FROM json_each(c.required_capabilities) AS r \
               WHERE r.value NOT IN (SELECT value FROM json_each($4))) \
             AND ($5 IS NULL OR c.job_type IN (SELECT value FROM json_each($5))) \
             AND ($6 IS NULL OR c.repository IN (SELECT value FROM json_each($6))) ",
            $extra,
            " ORDER BY c.priority DESC, c.created_at, c.id \
           LIMIT $7) \
         AND status = 'queued' \
         RETURNING id"
        )
    };
}

const CLAIM_SQLITE: &str = claim_sqlite_sql!("");

/// [`CLAIM_SQLITE`] that also skips a job whose repository has `$8` jobs running already.
/// The one writer makes the count exact.
const CLAIM_SQLITE_LIMITED: &str = claim_sqlite_sql!(
    "AND (SELECT count(*) FROM job_queue r INDEXED BY job_queue_running \
          WHERE r.repository = c.repository AND r.status = 'running') < $8"
);

/// Keeps a claimed job's `job.claimed` in its live row under the id drawn for it.
const KEEP_CLAIM_SQLITE: &str = "UPDATE job_queue SET claimed_event_id = $2 WHERE id = $1";

/// The claimed jobs (`$1`, a JSON array of their ids) as they now are.
const CLAIMED_SQLITE: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM ",
    job_from!(),
    " WHERE j.id IN (SELECT value FROM json_each($1))"
);

/// [`CLAIM_SQLITE`], then the claims' `job.claimed` kept in their rows (`kept.rs`) under
/// ids drawn in claim order, in one transaction on the writer.
pub(crate) async fn claim(
    db: &SqliteDb,
    claim: &ClaimSql<'_>,
) -> Result<Vec<(Job, JobEvent)>, QueueError> {
    let t = db.writer.begin().await?;
    let mut args = claim_args(claim)?;
    let id = |r: &rusqlite::Row<'_>| r.try_get::<Id, _>("id");
    let ids = match claim.repository_limit {
        None => sqlite_rows(&t, CLAIM_SQLITE, &args, id)?,
        Some(limit) => {
            // One job per statement, so that each counts the claims before it: a batch
            // never takes two jobs of a repository with room for one.
            args[6] = Arg::BigInt(1);
            args.push(Arg::BigInt(i64::from(limit)));
            let mut ids = Vec::new();
            for _ in 0..claim.limit {
                let one = sqlite_rows(&t, CLAIM_SQLITE_LIMITED, &args, id)?;
                if one.is_empty() {
                    break;
                }
                ids.extend(one);
            }
            ids
        }
    };
    if ids.is_empty() {
        t.rollback()?;
        return Ok(Vec::new());
    }
    let list = serde_json::Value::from(
        ids.iter()
            .map(|id| id.0.hyphenated().to_string())
            .collect::<Vec<_>>(),
    );
    let mut jobs = sqlite_rows(&t, CLAIMED_SQLITE, &[Arg::Json(list)], |r| job_from_row!(r))?;
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
