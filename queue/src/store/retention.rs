//! Retention's SQL: which finished jobs are due, and deleting their events, artifacts, log
//! lines and rows a batch at a time. Every write here either runs with the job's row locked
//! or checks again the row it changes, so a job retried meanwhile is left alone. Which
//! jobs a chore looks at is `walks.rs`'s.

use chrono::{DateTime, Utc};
use contract::job::task;
use sqlx::Row;
use uuid::Uuid;

use super::sqlite::RowExt;
use super::{Arg, Id, Ts, Tx, TxConn, pg_rows, sqlite_rows};
use crate::QueueError;

/// The job's first `$2` events, as a range of its key: on PostgreSQL, events are keyed by
/// (job_id, id), and an `id IN (...)` there would walk all of the job's events for each one.
const EVENTS: &str = "DELETE FROM job_events WHERE job_id = $1 AND id <= \
     (SELECT max(id) FROM (SELECT id FROM job_events WHERE job_id = $1 ORDER BY id LIMIT $2) AS first) \
     RETURNING id";

const ARTIFACTS: &str = "DELETE FROM artifacts WHERE id IN \
     (SELECT id FROM artifacts WHERE job_id = $1 LIMIT $2) RETURNING id";

/// The log lines of the listed jobs (`$1`, a JSON array of ids) that are still finished
/// before `$4`, up to `$2`. A line goes only when its step's log artifact (`task::step_log`,
/// as `logs/steps/step-0000.log`) is stored: the line is then in that file. Each backend
/// lists the ids and reads the step index out of the payload its own way; the conformance
/// suite names the file with `task::step_log` itself, so the two spellings cannot drift
/// apart unnoticed. No row lock: a job retried meanwhile adds its new lines after this
/// statement's snapshot, and only its old ones go.
const LOG_LINES_POSTGRES: &str = "DELETE FROM job_events WHERE (job_id, id) IN \
     (SELECT e.job_id, e.id FROM job_events e JOIN jobs j ON j.id = e.job_id \
      WHERE e.job_id IN (SELECT x::uuid FROM jsonb_array_elements_text($1) x) \
        AND j.finished_at IS NOT NULL AND j.finished_at < $4 AND e.kind = $3 AND EXISTS \
       (SELECT 1 FROM artifacts a WHERE a.job_id = e.job_id \
          AND a.name = 'logs/steps/step-' || lpad(e.payload->>'stepIndex', 4, '0') || '.log') \
      LIMIT $2) RETURNING id";
const LOG_LINES_SQLITE: &str = "DELETE FROM job_events WHERE id IN \
     (SELECT e.id FROM job_events e JOIN jobs j ON j.id = e.job_id \
      WHERE e.job_id IN (SELECT value FROM json_each($1)) \
        AND j.finished_at IS NOT NULL AND j.finished_at < $4 AND e.kind = $3 AND EXISTS \
       (SELECT 1 FROM artifacts a WHERE a.job_id = e.job_id \
          AND a.name = printf('logs/steps/step-%04d.log', json_extract(e.payload, '$.stepIndex'))) \
      LIMIT $2) RETURNING id";

/// Marks the listed jobs (`$1`) compacted at `$2`, those still finished before `$3` (checked
/// again on the row the update locks); answers their ids.
const MARK_LOGS_POSTGRES: &str = "UPDATE jobs SET logs_compacted_at = $2 \
     WHERE id IN (SELECT x::uuid FROM jsonb_array_elements_text($1) x) \
       AND finished_at IS NOT NULL AND finished_at < $3 RETURNING id";
const MARK_LOGS_SQLITE: &str = "UPDATE jobs SET logs_compacted_at = $2 \
     WHERE id IN (SELECT value FROM json_each($1)) \
       AND finished_at IS NOT NULL AND finished_at < $3 RETURNING id";

/// Marks the history deleted, if the job is still finished before the cutoff with its
/// history kept; answers the `finished_at` it stood at.
const MARK_HISTORY: &str = concat!(
    "UPDATE jobs SET history_deleted_at = $2, claimed_event_id = NULL, claimed_at = NULL, \
     claim_lease_until = NULL, completed_event_id = NULL WHERE id = $1 AND ",
    "finished_at IS NOT NULL \
     AND (history_deleted_at IS NULL OR history_deleted_at <= finished_at) \
     AND finished_at < $3 RETURNING finished_at"
);

/// Whether job `$2` is finished before `$1` with its history kept.
const HISTORY_DUE: &str = "SELECT id FROM jobs WHERE id = $2 AND finished_at IS NOT NULL \
     AND (history_deleted_at IS NULL OR history_deleted_at <= finished_at) \
     AND finished_at < $1";

/// The listed job rows (`$2`, a JSON array of ids) finished before `$1` whose history is
/// already gone (one event each is left, `job.history_deleted`), checked on the row the
/// delete locks: a job retried since it was read is not finished any more and stays.
const JOB_ROWS_POSTGRES: &str = "DELETE FROM jobs \
     WHERE id IN (SELECT x::uuid FROM jsonb_array_elements_text($2) x) \
       AND finished_at IS NOT NULL AND finished_at < $1 AND history_deleted_at > finished_at \
     RETURNING id";
const JOB_ROWS_SQLITE: &str = "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each($2)) \
       AND finished_at IS NOT NULL AND finished_at < $1 AND history_deleted_at > finished_at \
     RETURNING id";

impl Tx {
    /// Whether the job is finished before `before` with its history kept.
    pub(crate) async fn history_due(
        &mut self,
        job: Uuid,
        before: DateTime<Utc>,
    ) -> Result<bool, QueueError> {
        let args = [Arg::at(before), Arg::Id(job)];
        Ok(self.count_rows(HISTORY_DUE, &args).await? == 1)
    }

    /// Deletes up to `limit` of the job's events, oldest first; answers how many. The
    /// events its row keeps count among them: they are written out as rows first.
    pub(crate) async fn delete_events(&mut self, job: Uuid, limit: i64) -> Result<u64, QueueError> {
        self.write_out_kept(job).await?;
        self.count_rows(EVENTS, &[Arg::Id(job), Arg::BigInt(limit)])
            .await
    }

    /// Deletes up to `limit` of the job's artifacts (their bytes too, on PostgreSQL: the
    /// chunks cascade; on SQLite the caller removes the files); answers how many.
    pub(crate) async fn delete_artifacts(
        &mut self,
        job: Uuid,
        limit: i64,
    ) -> Result<u64, QueueError> {
        self.count_rows(ARTIFACTS, &[Arg::Id(job), Arg::BigInt(limit)])
            .await
    }

    /// Deletes up to `limit` log lines of the `jobs` still finished before `before` that
    /// their step-log artifacts hold; answers how many.
    pub(crate) async fn delete_log_lines(
        &mut self,
        jobs: &[Uuid],
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64, QueueError> {
        let args = [
            id_list(jobs),
            Arg::BigInt(limit),
            Arg::text(task::STEP_LOG),
            Arg::at(before),
        ];
        let sql = match self.conn {
            TxConn::Sqlite(_) => LOG_LINES_SQLITE,
            TxConn::Postgres(_) => LOG_LINES_POSTGRES,
        };
        self.count_rows(sql, &args).await
    }

    /// Marks the job's history deleted at `now` if it is still due (finished before
    /// `before`, history kept); answers the `finished_at` it was due for.
    pub(crate) async fn mark_history_deleted(
        &mut self,
        job: Uuid,
        now: DateTime<Utc>,
        before: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, QueueError> {
        self.mark(MARK_HISTORY, job, now, before).await
    }

    /// Marks the `jobs` still finished before `before` compacted at `now`; answers them.
    pub(crate) async fn mark_logs_compacted(
        &mut self,
        jobs: &[Uuid],
        now: DateTime<Utc>,
        before: DateTime<Utc>,
    ) -> Result<Vec<Uuid>, QueueError> {
        let args = [id_list(jobs), Arg::at(now), Arg::at(before)];
        let sql = match self.conn {
            TxConn::Sqlite(_) => MARK_LOGS_SQLITE,
            TxConn::Postgres(_) => MARK_LOGS_POSTGRES,
        };
        self.ids(sql, &args).await
    }

    /// Deletes the rows of the `jobs` finished before `before` whose history is gone, and
    /// what retention kept to look at them again; answers the ids of those deleted.
    pub(crate) async fn delete_job_rows(
        &mut self,
        jobs: &[Uuid],
        before: DateTime<Utc>,
    ) -> Result<Vec<Uuid>, QueueError> {
        let args = [Arg::at(before), id_list(jobs)];
        let sql = match self.conn {
            TxConn::Sqlite(_) => JOB_ROWS_SQLITE,
            TxConn::Postgres(_) => JOB_ROWS_POSTGRES,
        };
        let ids = self.ids(sql, &args).await?;
        if ids.is_empty() {
            return Ok(ids);
        }
        // PostgreSQL's events name their job without a foreign key (migration 0011), so
        // nothing cascades there; SQLite's cascade has already taken them.
        if let TxConn::Postgres(t) = &mut self.conn {
            sqlx::query("DELETE FROM job_events WHERE job_id = ANY($1)")
                .bind(&ids)
                .execute(&mut **t)
                .await?;
        }
        self.forget_pending(&ids).await?;
        Ok(ids)
    }

    /// Runs a statement that answers the `id` of each row it changed.
    async fn ids(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Uuid>, QueueError> {
        let decode = |id: Id| id.0;
        Ok(match &mut self.conn {
            TxConn::Sqlite(t) => {
                sqlite_rows(t, sql, args, |r| r.try_get::<Id, _>("id").map(decode))?
            }
            TxConn::Postgres(t) => {
                pg_rows(t, sql, args, |r| r.try_get::<Id, _>("id").map(decode)).await?
            }
        })
    }

    async fn mark(
        &mut self,
        sql: &str,
        job: Uuid,
        now: DateTime<Utc>,
        before: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, QueueError> {
        let args = [Arg::Id(job), Arg::at(now), Arg::at(before)];
        let rows = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, sql, &args, |r| {
                r.try_get::<Ts, _>("finished_at").map(|t| t.0)
            })?,
            TxConn::Postgres(t) => {
                pg_rows(t, sql, &args, |r| {
                    r.try_get::<Ts, _>("finished_at").map(|t| t.0)
                })
                .await?
            }
        };
        Ok(rows.into_iter().next())
    }

    /// Runs a statement that answers one row per row it changed; answers how many.
    async fn count_rows(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, QueueError> {
        let n = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, sql, args, |_| Ok(()))?.len(),
            TxConn::Postgres(t) => pg_rows(t, sql, args, |_| Ok(())).await?.len(),
        };
        Ok(n as u64)
    }
}

/// Ids as one JSON array, which both backends can list in a query.
fn id_list(ids: &[Uuid]) -> Arg<'static> {
    Arg::Json(
        ids.iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .into(),
    )
}
