//! Rows written in bulk behind the state machine's back, for `stepwise bench scale` only
//! (the `seed` feature): a million jobs or a hundred thousand log lines take minutes through
//! the service and seconds this way. Never in a build that serves.

use serde_json::Value;
use uuid::Uuid;

use super::{Arg, Tx, TxConn};
use crate::QueueError;
use crate::store::{Database, PgDb};

/// Every column but `id` and `status`, copied from the template.
const COPIED: &str = "job_type, priority, payload, repository, affinity_key, \
     required_capabilities, created_by_user_id, attempt, max_attempts, next_attempt_at, \
     claimed_by, lease_expires_at, cancel_requested_at, cancel_requested_by_user_id, \
     cancel_reason, result_summary, error_message, started_at, finished_at, created_at, \
     updated_at, usage, pause_requested, resume_from, approval";

impl Tx {
    /// Copies job `template` as `ids` (a JSON array of id strings) with `status`.
    pub(crate) async fn copy_job(
        &mut self,
        template: Uuid,
        ids: &[Uuid],
        status: &str,
    ) -> Result<(), QueueError> {
        // A live job would need its live row (`live.rs`) too; the bench seeds ended ones.
        if matches!(status, "queued" | "running") {
            return Err(QueueError::invalid(
                "status",
                "copies are of jobs that ended: a live job needs its live row",
            ));
        }
        let list = Value::from(ids.iter().map(|id| id.to_string()).collect::<Vec<_>>());
        let from = match self.conn {
            TxConn::Postgres(_) => "(SELECT x::uuid AS id FROM jsonb_array_elements_text($2) x)",
            TxConn::Sqlite(_) => "(SELECT value AS id FROM json_each($2))",
        };
        let sql = format!(
            "INSERT INTO jobs (id, status, {COPIED}) SELECT n.id, $3, {COPIED} \
             FROM jobs, {from} n WHERE jobs.id = $1"
        );
        let args = [Arg::Id(template), Arg::Json(list), Arg::text(status)];
        self.execute(&sql, &args).await
    }

    /// Appends `n` events of `kind` with `payload` to the job, messages numbered from 1.
    pub(crate) async fn repeat_event(
        &mut self,
        job: Uuid,
        kind: &str,
        payload: Value,
        at: chrono::DateTime<chrono::Utc>,
        n: i64,
    ) -> Result<(), QueueError> {
        let numbers = match self.conn {
            TxConn::Postgres(_) => "generate_series(1, $5) AS s(n)",
            TxConn::Sqlite(_) => "s",
        };
        let head = match self.conn {
            TxConn::Postgres(_) => "",
            TxConn::Sqlite(_) => {
                "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < $5) "
            }
        };
        let sql = format!(
            "{head}INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
             SELECT $1, $2, 'info', 'output line ' || n || ' of a chatty agent', $3, $4 \
             FROM {numbers}"
        );
        let args = [
            Arg::Id(job),
            Arg::text(kind),
            Arg::Json(payload),
            Arg::at(at),
            Arg::BigInt(n),
        ];
        self.execute(&sql, &args).await
    }
}

impl Database {
    /// The bytes the database takes: PostgreSQL's own count, or SQLite's pages (its
    /// write-ahead log aside).
    pub(crate) async fn size_bytes(&self) -> Result<u64, QueueError> {
        match self {
            Database::Postgres(PgDb { pool, .. }) => {
                let size: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
                    .fetch_one(pool)
                    .await?;
                Ok(size.max(0) as u64)
            }
            Database::Sqlite(db) => {
                let size: i64 = sqlx::query_scalar(
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
                )
                .fetch_one(&db.pool)
                .await?;
                Ok(size.max(0) as u64)
            }
        }
    }

    /// PostgreSQL's current WAL position, in bytes from the start and as `pg_lsn` text;
    /// `None` on SQLite.
    pub(crate) async fn wal_position(&self) -> Result<Option<(i64, String)>, QueueError> {
        match self {
            Database::Postgres(PgDb { pool, .. }) => {
                let at: (i64, String) = sqlx::query_as(
                    "SELECT (lsn - '0/0'::pg_lsn)::bigint, lsn::text \
                     FROM pg_current_wal_lsn() AS lsn",
                )
                .fetch_one(pool)
                .await?;
                Ok(Some(at))
            }
            Database::Sqlite(_) => Ok(None),
        }
    }

    /// How often PostgreSQL's processes have flushed the WAL to disk since its statistics
    /// were reset (`pg_stat_wal.wal_sync`); `None` on SQLite. Each backend reports its count
    /// when it goes idle, at most once a second and within ten seconds, or when it exits.
    pub(crate) async fn wal_flushes(&self) -> Result<Option<i64>, QueueError> {
        match self {
            Database::Postgres(PgDb { pool, .. }) => {
                let flushes: i64 = sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
                    .fetch_one(pool)
                    .await?;
                Ok(Some(flushes))
            }
            Database::Sqlite(_) => Ok(None),
        }
    }
}
