//! SQLite's claim: one UPDATE on the writer, then the claims' events as Rust builds them.

use contract::{Job, JobEvent, JobId};

use super::RowExt;
use crate::QueueError;
use crate::machine::{self, PendingEvent};
use crate::store::SqliteDb;
use crate::store::claim_sql::{ClaimSql, claim_args, claim_order};
use crate::store::{Arg, Tx, TxConn, sqlite_rows};

/// SQLite: the statement runs inside `BEGIN IMMEDIATE`, and SQLite admits one writer at a
/// time, so no other claim can run between the subquery's pick and the update.
/// INDEXED BY: left to itself SQLite picks jobs_by_status and sorts every queued row (a
/// temp B-tree per claim, so claims slow down as the queue grows); walking
/// jobs_claim_order stops at the first claimable job. `$extra` is one more condition on
/// the candidate row, `j`.
macro_rules! claim_sqlite_sql {
    ($extra:literal) => {
        concat!(
            "UPDATE jobs SET status = 'running', claimed_by = $1, lease_expires_at = $2, \
         attempt = attempt + 1, started_at = COALESCE(started_at, $3), updated_at = $3 \
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
    "AND (SELECT count(*) FROM jobs r INDEXED BY jobs_running_by_repository \
          WHERE r.repository = j.repository AND r.status = 'running') < $8"
);

/// [`CLAIM_SQLITE`], then the claims' events from `machine::claimed_event`,
/// in one transaction on the writer.
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
    let claimed: Vec<PendingEvent> = jobs.iter().map(machine::claimed_event).collect();
    let appended: Vec<(JobId, &PendingEvent)> = jobs
        .iter()
        .zip(&claimed)
        .map(|(job, event)| (job.id, event))
        .collect();
    let mut tx = Tx {
        conn: TxConn::Sqlite(t),
        notes: Vec::new(),
    };
    let events = tx.insert_events(&appended, claim.now).await?;
    tx.commit().await?;
    Ok(jobs.into_iter().zip(events).collect())
}
