//! Retention's walks (migration 0024): how each chore finds the jobs it may have work on
//! without an index of their ends. A chore walks the jobs in id order (UUIDv7: creation
//! order) from a cursor it keeps, and keeps the jobs it passed over before they were due;
//! a job queued again after it finished is kept again by the save that queues it.

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::{Arg, Id, Ts, Tx, TxConn};
use crate::QueueError;
use crate::store::Database;

/// One of retention's chores, each walking the jobs on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chore {
    /// Log lines that the step-log artifacts hold.
    Logs,
    /// Events and artifacts.
    History,
    /// Job rows whose history is gone.
    Rows,
}

impl Chore {
    pub(crate) const ALL: [Chore; 3] = [Chore::Logs, Chore::History, Chore::Rows];

    /// Its name in `retention_cursors` and `retention_pending`.
    fn name(self) -> &'static str {
        match self {
            Chore::Logs => "logs",
            Chore::History => "history",
            Chore::Rows => "rows",
        }
    }
}

/// What a chore reads of a job: when it came and ended, and what retention did since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub history_deleted_at: Option<DateTime<Utc>>,
    pub logs_compacted_at: Option<DateTime<Utc>>,
}

/// A job a chore passed over, as it kept it: when the job had finished, or else when to
/// look at it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PassedOver {
    pub finished_at: Option<DateTime<Utc>>,
    pub recheck_at: Option<DateTime<Utc>>,
}

/// Which of a chore's pending jobs to read: those finished before a cutoff, or those to
/// look at again by a time; each after a position in its own order, the keyset of a pass
/// that leaves some rows as they were.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Look {
    Finished {
        before: DateTime<Utc>,
        after: (DateTime<Utc>, Uuid),
    },
    Recheck {
        by: DateTime<Utc>,
        after: (DateTime<Utc>, Uuid),
    },
}

macro_rules! seen_columns {
    ($j:literal) => {
        concat!(
            $j,
            "id AS id, ",
            $j,
            "created_at AS created_at, ",
            $j,
            "finished_at AS finished_at, ",
            $j,
            "history_deleted_at AS history_deleted_at, ",
            $j,
            "logs_compacted_at AS logs_compacted_at"
        )
    };
}

const CURSOR: &str = "SELECT after_id FROM retention_cursors WHERE chore = $1";

/// The jobs after the cursor, along the primary key.
const WALK: &str = concat!(
    "SELECT ",
    seen_columns!(""),
    " FROM jobs WHERE id > $1 ORDER BY id LIMIT $2"
);

/// A chore's pending jobs with what is seen of each (no job: its row is gone).
macro_rules! pending_sql {
    ($column:literal, $cmp:literal) => {
        concat!(
            "SELECT p.job_id AS job_id, p.finished_at AS passed_finished_at, \
             p.recheck_at AS passed_recheck_at, ",
            seen_columns!("j."),
            " FROM retention_pending p LEFT JOIN jobs j ON j.id = p.job_id \
             WHERE p.chore = $1 AND p.",
            $column,
            " ",
            $cmp,
            " $2 AND (p.",
            $column,
            ", p.job_id) > ($3, $4) ORDER BY p.",
            $column,
            ", p.job_id LIMIT $5"
        )
    };
}

const PENDING_FINISHED: &str = pending_sql!("finished_at", "<");
const PENDING_RECHECK: &str = pending_sql!("recheck_at", "<=");

const PASS_OVER: &str = "INSERT INTO retention_pending (chore, job_id, finished_at, recheck_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (chore, job_id) DO NOTHING";

/// The cursor moves on, never back: two replicas walking at once each move it to where
/// they got.
const MOVE_CURSOR: &str = "INSERT INTO retention_cursors (chore, after_id) VALUES ($1, $2) \
     ON CONFLICT (chore) DO UPDATE SET after_id = excluded.after_id \
     WHERE retention_cursors.after_id < excluded.after_id";

/// A pending job settled or put off, only while its row is as it was read: a job queued
/// again meanwhile was kept again by the save that queued it, which this must not undo.
const SETTLE: &str = "DELETE FROM retention_pending WHERE chore = $1 AND job_id = $2 \
     AND finished_at IS NOT DISTINCT FROM $3 AND recheck_at IS NOT DISTINCT FROM $4";
const PUT_OFF: &str = "UPDATE retention_pending SET finished_at = $5, recheck_at = $6 \
     WHERE chore = $1 AND job_id = $2 \
     AND finished_at IS NOT DISTINCT FROM $3 AND recheck_at IS NOT DISTINCT FROM $4";

/// Only the chores whose walk has passed the job: the others will walk to it.
const REOPENED: &str = "INSERT INTO retention_pending (chore, job_id, finished_at, recheck_at) \
     SELECT chore, $1, NULL, $2 FROM retention_cursors WHERE after_id >= $1 \
     ON CONFLICT (chore, job_id) \
     DO UPDATE SET finished_at = NULL, recheck_at = excluded.recheck_at";

macro_rules! seen_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<Option<Seen>, sqlx::Error> {
            let Some(id) = row.try_get::<Option<Id>, _>("id")? else {
                return Ok(None);
            };
            let at = |name: &str| -> Result<Option<DateTime<Utc>>, sqlx::Error> {
                Ok(row.try_get::<Option<Ts>, _>(name)?.map(|t| t.0))
            };
            Ok(Some(Seen {
                id: id.0,
                created_at: row.try_get::<Ts, _>("created_at")?.0,
                finished_at: at("finished_at")?,
                history_deleted_at: at("history_deleted_at")?,
                logs_compacted_at: at("logs_compacted_at")?,
            }))
        })()
    }};
}

macro_rules! pending_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<(Uuid, PassedOver, Option<Seen>), sqlx::Error> {
            let at = |name: &str| -> Result<Option<DateTime<Utc>>, sqlx::Error> {
                Ok(row.try_get::<Option<Ts>, _>(name)?.map(|t| t.0))
            };
            let passed = PassedOver {
                finished_at: at("passed_finished_at")?,
                recheck_at: at("passed_recheck_at")?,
            };
            Ok((
                row.try_get::<Id, _>("job_id")?.0,
                passed,
                seen_from_row!(row)?,
            ))
        })()
    }};
}

impl Database {
    /// Where `chore` has walked to (the nil id before its first walk), and up to `limit`
    /// jobs after it, in id order.
    pub(crate) async fn walk(
        &self,
        chore: Chore,
        limit: i64,
    ) -> Result<(Uuid, Vec<Seen>), sqlx::Error> {
        on_pool!(self, p => {
            let cursor: Option<Id> = sqlx::query_scalar(CURSOR)
                .bind(chore.name())
                .fetch_optional(p)
                .await?;
            let cursor = cursor.map_or(Uuid::nil(), |id| id.0);
            let rows = sqlx::query(WALK).bind(Id(cursor)).bind(limit).fetch_all(p).await?;
            let seen = rows
                .iter()
                .map(|row| seen_from_row!(row)?.ok_or(sqlx::Error::RowNotFound))
                .collect::<Result<_, _>>()?;
            Ok((cursor, seen))
        })
    }

    /// Up to `limit` of `chore`'s pending jobs that `look` asks for, in its order, each as
    /// it was kept and as it is now (`None`: its row is gone).
    pub(crate) async fn pending(
        &self,
        chore: Chore,
        look: Look,
        limit: i64,
    ) -> Result<Vec<(Uuid, PassedOver, Option<Seen>)>, sqlx::Error> {
        let (sql, at, (after_at, after_id)) = match look {
            Look::Finished { before, after } => (PENDING_FINISHED, before, after),
            Look::Recheck { by, after } => (PENDING_RECHECK, by, after),
        };
        on_pool!(self, p => {
            let rows = sqlx::query(sql)
                .bind(chore.name())
                .bind(Ts(at))
                .bind(Ts(after_at))
                .bind(Id(after_id))
                .bind(limit)
                .fetch_all(p)
                .await?;
            rows.iter().map(|row| pending_from_row!(row)).collect()
        })
    }
}

impl Tx {
    /// `chore` walked on to `to`, keeping the jobs it passed over before they were due.
    pub(crate) async fn walked(
        &mut self,
        chore: Chore,
        to: Uuid,
        passed: &[(Uuid, PassedOver)],
    ) -> Result<(), QueueError> {
        for (job, kept) in passed {
            let args = [
                Arg::text(chore.name()),
                Arg::Id(*job),
                Arg::Ts(kept.finished_at),
                Arg::Ts(kept.recheck_at),
            ];
            self.execute(PASS_OVER, &args).await?;
        }
        self.execute(MOVE_CURSOR, &[Arg::text(chore.name()), Arg::Id(to)])
            .await
    }

    /// A pending job of `chore`, read as `was`, no longer pending (`now` `None`) or put off
    /// to `now`; left alone if its row changed since.
    pub(crate) async fn repend(
        &mut self,
        chore: Chore,
        job: Uuid,
        was: PassedOver,
        now: Option<PassedOver>,
    ) -> Result<(), QueueError> {
        let mut args = vec![
            Arg::text(chore.name()),
            Arg::Id(job),
            Arg::Ts(was.finished_at),
            Arg::Ts(was.recheck_at),
        ];
        let sql = match now {
            None => SETTLE,
            Some(now) => {
                args.extend([Arg::Ts(now.finished_at), Arg::Ts(now.recheck_at)]);
                PUT_OFF
            }
        };
        self.execute(sql, &args).await
    }

    /// `jobs` were queued again after they had finished: every chore whose walk has passed
    /// them looks at them again from `now`.
    pub(crate) async fn reopened(
        &mut self,
        jobs: &[Uuid],
        now: DateTime<Utc>,
    ) -> Result<(), QueueError> {
        for job in jobs {
            self.execute(REOPENED, &[Arg::Id(*job), Arg::at(now)])
                .await?;
        }
        Ok(())
    }

    /// What the chores kept of `jobs`, whose rows are gone.
    pub(super) async fn forget_pending(&mut self, jobs: &[Uuid]) -> Result<(), QueueError> {
        let ids = serde_json::Value::from(jobs.iter().map(|id| id.to_string()).collect::<Vec<_>>());
        let chores =
            serde_json::Value::from(Chore::ALL.iter().map(|c| c.name()).collect::<Vec<_>>());
        let sql = match self.conn {
            TxConn::Sqlite(_) => {
                "DELETE FROM retention_pending WHERE chore IN (SELECT value FROM json_each($1)) \
                 AND job_id IN (SELECT value FROM json_each($2))"
            }
            TxConn::Postgres(_) => {
                "DELETE FROM retention_pending \
                 WHERE chore IN (SELECT jsonb_array_elements_text($1)) \
                 AND job_id IN (SELECT x::uuid FROM jsonb_array_elements_text($2) x)"
            }
        };
        self.execute(sql, &[Arg::Json(chores), Arg::Json(ids)])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statements of a pass, each with the index it must read through and nothing it
    /// must sort: the walk along the primary key from its cursor, the pending jobs along
    /// their own two indexes.
    const PLANS: [(&str, &str); 3] = [
        (WALK, "jobs_pkey"),
        (PENDING_FINISHED, "retention_pending_finished"),
        (PENDING_RECHECK, "retention_pending_recheck"),
    ];

    fn arguments(sql: &str) -> usize {
        if sql == WALK { 2 } else { 5 }
    }

    #[tokio::test]
    async fn sqlite_reads_each_walk_through_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_data_dir(dir.path()).await.unwrap();
        crate::migrate::run(&db).await.unwrap();
        let Database::Sqlite(lite) = &db else {
            unreachable!("a data directory opens SQLite")
        };
        for (sql, index) in PLANS {
            let index = index.replace("jobs_pkey", "sqlite_autoindex_jobs_1");
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut query = sqlx::query(&explain);
            for _ in 0..arguments(sql) {
                query = query.bind(Option::<i64>::None);
            }
            let rows = query.fetch_all(lite.pool()).await.unwrap();
            let plan: Vec<String> = rows.iter().map(|r| r.get("detail")).collect();
            let plan = plan.join("\n");
            assert!(plan.contains(&index), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
        }
    }

    #[tokio::test]
    async fn postgres_reads_each_walk_through_its_index() {
        let (scratch, _db, pool) = super::super::postgres::scratch("stepwise_walks").await;
        sqlx::query(
            "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
             required_capabilities, max_attempts, next_attempt_at, created_at, updated_at, \
             finished_at) \
             SELECT gen_random_uuid(), 'task', 'succeeded', 0, '{}', 'o/r', '[\"codex\"]', 3, \
               now(), now(), now(), now() FROM generate_series(1, 20000)",
        )
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO retention_pending (chore, job_id, finished_at, recheck_at) \
             SELECT c, id, CASE WHEN n % 2 = 0 THEN now() END, CASE WHEN n % 2 = 1 THEN now() END \
             FROM (SELECT id, row_number() OVER () AS n FROM jobs) AS j, \
               (VALUES ('logs'), ('history'), ('rows')) AS chores(c)",
        )
        .execute(&pool)
        .await
        .unwrap();
        for table in ["jobs", "retention_pending"] {
            sqlx::query(&format!("ANALYZE {table}"))
                .execute(&pool)
                .await
                .unwrap();
        }
        for (sql, index) in PLANS {
            let explain = format!("EXPLAIN {sql}");
            let mut query = sqlx::query_scalar::<_, String>(&explain);
            query = if sql == WALK {
                query.bind(Id(Uuid::nil())).bind(50_i64)
            } else {
                query
                    .bind("logs")
                    .bind(Ts(Utc::now()))
                    .bind(Ts(DateTime::UNIX_EPOCH))
                    .bind(Id(Uuid::nil()))
                    .bind(50_i64)
            };
            let plan = query.fetch_all(&pool).await.unwrap().join("\n");
            assert!(plan.contains(index), "{sql}: {plan}");
            assert!(!plan.contains("Seq Scan"), "{sql}: {plan}");
            assert!(!plan.contains("Sort"), "{sql}: {plan}");
        }
        pool.close().await;
        scratch.drop_database().await.unwrap();
    }
}
