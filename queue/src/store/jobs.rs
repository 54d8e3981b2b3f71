//! The jobs table: a job's row, created, locked, written back, swapped, listed.

use chrono::{DateTime, Utc};
use contract::{Job, JobEvent, JobState};
use sqlx::Row;
use uuid::Uuid;

use super::live::is_live;
use super::postgres;
use super::sqlite::RowExt;
use super::{Arg, Id, Ts, Tx, TxConn, int, sqlite_rows};
use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::{Database, PgDb};
use crate::store::{Swap, Swapped};

/// The fields a transition may change, in the order of `$2`..`$14` of [`SAVE_JOB`] and
/// [`INSERT_JOB`].
pub(super) fn state_args(job: &Job) -> [Arg<'_>; 13] {
    [
        Arg::text(job.status.as_str()),
        Arg::Int(int(job.attempt)),
        Arg::at(job.next_attempt_at),
        Arg::opt(&job.claimed_by),
        Arg::Ts(job.lease_expires_at),
        Arg::Ts(job.cancel_requested_at),
        Arg::opt(&job.cancel_requested_by_user_id),
        Arg::opt(&job.cancel_reason),
        Arg::opt(&job.result_summary),
        Arg::opt(&job.error_message),
        Arg::Ts(job.started_at),
        Arg::Ts(job.finished_at),
        Arg::at(job.updated_at),
    ]
}

/// The fields a transition may change besides those of [`state_args`], added after them:
/// `$15`..`$17` of [`SAVE_JOB`]. A new job has none, so [`INSERT_JOB`] leaves them NULL.
pub(super) fn control_args(job: &Job) -> Result<[Arg<'static>; 3], sqlx::Error> {
    Ok([
        Arg::json_opt(job.pause_requested.as_ref())?,
        Arg::json_opt(job.resume_from.as_ref())?,
        Arg::json_opt(job.approval.as_ref())?,
    ])
}

/// The fields only a new job sets, in the order of `$15`..`$23` of [`INSERT_JOB`].
pub(super) fn created_args<'a>(
    job: &'a Job,
    repository: &'a str,
) -> Result<[Arg<'a>; 9], sqlx::Error> {
    Ok([
        Arg::text(&job.job_type),
        Arg::Int(job.priority),
        Arg::json(&job.payload)?,
        Arg::opt(&job.affinity_key),
        Arg::json(&job.required_capabilities)?,
        Arg::opt(&job.created_by_user_id),
        Arg::Int(int(job.max_attempts)),
        Arg::at(job.created_at),
        Arg::text(repository),
    ])
}

const LOCK_JOB_SQLITE: &str = concat!(
    "SELECT ",
    job_columns!(),
    ", ",
    kept_columns!(),
    " FROM ",
    job_from!(),
    " WHERE j.id = $1"
);

const INSERT_JOB: &str = insert_job_sql!();

const SAVE_JOB: &str = "UPDATE jobs SET status = $2, attempt = $3, next_attempt_at = $4, \
     claimed_by = $5, lease_expires_at = $6, cancel_requested_at = $7, \
     cancel_requested_by_user_id = $8, cancel_reason = $9, result_summary = $10, \
     error_message = $11, started_at = $12, finished_at = $13, updated_at = $14, \
     pause_requested = $15, resume_from = $16, approval = $17 \
     WHERE id = $1";

/// The states `jobs_listed_apart` holds (migrations 0023, 0025), through the column
/// `listed_state` that is theirs and NULL for the others: neither a claim nor a success
/// changes it. Every statement meant to use the index says its predicate: SQLite takes a
/// partial index only then.
macro_rules! listed_apart {
    () => {
        "listed_state IS NOT NULL"
    };
}

/// Where the list finds the jobs in a state.
fn listed_apart(state: JobState) -> bool {
    !matches!(
        state,
        JobState::Queued | JobState::Running | JobState::Succeeded
    )
}

/// The rows a list reads and its condition on the state. A live state's jobs are found
/// among the live rows (`live.rs`), which also say their state; the states apart through
/// `jobs_listed_apart`; succeeded jobs, most of the table, by walking the primary key
/// (no job with a live row is `succeeded` in its own). The name is written out, not bound
/// (a closed enum's wire name): SQLite matches a partial index's predicate only against
/// literals.
fn state_rows(state: Option<JobState>, sqlite: bool) -> StateRows {
    let all = StateRows {
        from: concat!(" FROM ", job_from!()),
        condition: None,
        key: "j.id",
    };
    match state {
        None => all,
        // SQLite, with no statistics, would rather sort what an index of the state holds
        // than walk the key in the list's order.
        Some(JobState::Queued) if sqlite => StateRows {
            from: " FROM job_queue q INDEXED BY job_queue_pkey JOIN jobs j ON j.id = q.id",
            condition: Some("q.status = 'queued'".into()),
            key: "q.id",
        },
        Some(state) if is_live(state) => StateRows {
            from: " FROM job_queue q JOIN jobs j ON j.id = q.id",
            condition: Some(format!("q.status = '{}'", state.as_str())),
            key: "q.id",
        },
        Some(state) if listed_apart(state) => StateRows {
            condition: Some(format!(
                concat!("j.", listed_apart!(), " AND j.listed_state = '{}'"),
                state.as_str()
            )),
            ..all
        },
        Some(state) => StateRows {
            condition: Some(format!("j.status = '{}'", state.as_str())),
            ..all
        },
    }
}

/// What [`state_rows`] answers: the rows, the condition, and the id the list pages by
/// (the rows it walks).
struct StateRows {
    from: &'static str,
    condition: Option<String>,
    key: &'static str,
}

/// How many jobs are in each state, without an index of every job's state: the live ones
/// counted among the live rows, the states apart through their index, the succeeded the
/// rest of all. One statement, so one snapshot: the figures add up.
const COUNT_BY_STATUS: &str = concat!(
    "WITH apart AS (SELECT listed_state AS status, COUNT(*) AS n FROM jobs WHERE ",
    listed_apart!(),
    " GROUP BY listed_state), \
     live AS (SELECT status, COUNT(*) AS n FROM job_queue GROUP BY status) \
     SELECT status, n FROM apart \
     UNION ALL SELECT status, n FROM live \
     UNION ALL SELECT 'succeeded', CAST((SELECT COUNT(*) FROM jobs) \
       - (SELECT COALESCE(SUM(n), 0) FROM live) \
       - (SELECT COALESCE(SUM(n), 0) FROM apart) AS BIGINT)"
);

/// The filter of a job listing, already parsed.
pub(crate) struct ListSql<'a> {
    pub status: Option<JobState>,
    pub job_type: Option<&'a str>,
    pub before: Option<Uuid>,
    pub limit: i64,
}

impl Tx {
    /// The job, locked until commit: `FOR UPDATE` on PostgreSQL; on SQLite the IMMEDIATE
    /// transaction already excludes every other writer. What its row keeps of its timeline
    /// is remembered, for a save that changes it to write out first (`kept.rs`).
    pub(crate) async fn lock_job(&mut self, id: Uuid) -> Result<Option<Job>, QueueError> {
        Ok(self.lock_jobs(&[id]).await?.pop())
    }

    pub(crate) async fn insert_job(
        &mut self,
        job: &Job,
        repository: &str,
    ) -> Result<(), QueueError> {
        let mut args = vec![Arg::Id(job.id.uuid())];
        args.extend(state_args(job));
        args.extend(created_args(job, repository)?);
        self.execute(INSERT_JOB, &args).await?;
        self.insert_live(job).await
    }

    /// Writes back every field a transition may change.
    pub(crate) async fn save_job(&mut self, job: &Job) -> Result<(), QueueError> {
        let mut args = vec![Arg::Id(job.id.uuid())];
        args.extend(state_args(job));
        args.extend(control_args(job)?);
        self.execute(SAVE_JOB, &args).await
    }

    /// Writes the job's task (`payload`): steps appended, which no transition does.
    pub(crate) async fn save_payload(&mut self, job: &Job) -> Result<(), QueueError> {
        self.write_out_changed(&[job]).await?;
        let args = [Arg::Id(job.id.uuid()), Arg::json(&job.payload)?];
        self.execute("UPDATE jobs SET payload = $2 WHERE id = $1", &args)
            .await
    }

    /// The jobs among `ids` that exist, each locked until commit (on PostgreSQL in id
    /// order, so two transactions locking overlapping sets cannot deadlock).
    pub(crate) async fn lock_jobs(&mut self, ids: &[Uuid]) -> Result<Vec<Job>, QueueError> {
        let locked = match &mut self.conn {
            TxConn::Sqlite(t) => {
                let mut locked = Vec::with_capacity(ids.len());
                for id in ids {
                    let args = [Arg::Id(*id)];
                    locked.extend(sqlite_rows(t, LOCK_JOB_SQLITE, &args, |r| {
                        Ok((job_from_row!(r)?, kept_from_row!(r)?))
                    })?);
                }
                locked
            }
            TxConn::Postgres(t) => postgres::lock_jobs(t, ids).await?,
        };
        let mut jobs = Vec::with_capacity(locked.len());
        for (job, kept) in locked {
            self.locked(&job, kept);
            if job.finished_at.is_some() && !self.finished.contains(&job.id.uuid()) {
                self.finished.push(job.id.uuid());
            }
            jobs.push(job);
        }
        Ok(jobs)
    }

    /// [`save_job`](Self::save_job) for several jobs; one statement on PostgreSQL.
    /// What their rows keep and the save changes is written out first (`kept.rs`).
    pub(crate) async fn save_jobs(&mut self, jobs: &[&Job]) -> Result<(), QueueError> {
        self.write_out_changed(jobs).await?;
        let reopened: Vec<Uuid> = jobs
            .iter()
            .filter(|job| job.finished_at.is_none() && self.finished.contains(&job.id.uuid()))
            .map(|job| job.id.uuid())
            .collect();
        if let Some(job) = jobs.iter().find(|job| reopened.contains(&job.id.uuid())) {
            self.finished.retain(|id| !reopened.contains(id));
            self.reopened(&reopened, job.updated_at).await?;
        }
        if let TxConn::Postgres(t) = &mut self.conn {
            postgres::save_jobs(t, jobs).await?;
        } else {
            for job in jobs {
                self.save_job(job).await?;
            }
        }
        self.save_live(jobs).await
    }
}

impl Database {
    /// How many jobs are in each state (states with none left out).
    pub(crate) async fn count_by_status(&self) -> Result<Vec<(String, i64)>, sqlx::Error> {
        let mut counts: Vec<(String, i64)> =
            on_pool!(self, p => sqlx::query_as(COUNT_BY_STATUS).fetch_all(p).await)?;
        counts.retain(|(_, n)| *n > 0);
        Ok(counts)
    }
}

// Writes that need no row lock beforehand: on PostgreSQL each is one statement outside an
// explicit transaction, which saves the BEGIN and COMMIT round trips; on SQLite a
// transaction on the writer, which costs no round trip at all.
impl Database {
    /// Inserts a new job with its first events (stamped with its creation time),
    /// atomically; returns the stored events, in order.
    pub(crate) async fn create_job(
        &self,
        job: &Job,
        repository: &str,
        events: &[PendingEvent],
    ) -> Result<Vec<JobEvent>, QueueError> {
        if let Database::Postgres(PgDb { pool, .. }) = self {
            return postgres::create_job(pool, job, repository, events).await;
        }
        let mut tx = Tx::begin(self).await?;
        tx.insert_job(job, repository).await?;
        let mut stored = Vec::with_capacity(events.len());
        for event in events {
            stored.push(tx.insert_event(&job.id, event, job.created_at).await?);
        }
        tx.commit().await?;
        Ok(stored)
    }

    /// PostgreSQL: writes `swap.new` over the row only if the row still equals `swap.old`
    /// in every field a transition may change, and appends its events in the same
    /// statement, which concurrent swaps share (see `postgres::swap_committer`). `None`
    /// when the row changed meanwhile (nothing written); otherwise the new event ids, in
    /// order.
    pub(crate) async fn write_job_if_unchanged(&self, swap: Swap) -> Result<Swapped, QueueError> {
        let Database::Postgres(db) = self else {
            unreachable!("a PostgreSQL path; SQLite transitions hold the write lock")
        };
        db.swaps.write(swap).await
    }

    /// PostgreSQL: several swaps in one statement of their own, for a caller whose writes
    /// already come as a batch (the committer's line would split them). One answer per
    /// swap, in order; two swaps of one job must not share the batch.
    pub(crate) async fn write_jobs_if_unchanged(
        &self,
        swaps: &[&Swap],
    ) -> Result<Vec<Swapped>, QueueError> {
        let Database::Postgres(db) = self else {
            unreachable!("a PostgreSQL path; SQLite transitions hold the write lock")
        };
        postgres::write_on_pool(&db.pool, swaps).await
    }

    pub(crate) async fn get_job(&self, id: Uuid) -> Result<Option<Job>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!("SELECT ", job_columns!(), " FROM ", job_from!(), " WHERE j.id = $1"))
                .bind(Id(id))
                .fetch_optional(p)
                .await?;
            row.map(|row| job_from_row!(&row)).transpose()
        })
    }

    /// Newest first. The WHERE clause is built for the filters actually given, so each
    /// combination is a plain indexed range scan rather than a `$n IS NULL OR …` plan.
    pub(crate) async fn list_jobs(&self, filter: &ListSql<'_>) -> Result<Vec<Job>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = state_rows(filter.status, matches!(self, Database::Sqlite(_)));
            let mut query = sqlx::QueryBuilder::new(concat!("SELECT ", job_columns!()));
            query.push(rows.from);
            let mut and = " WHERE ";
            if let Some(condition) = &rows.condition {
                query.push(and).push(condition);
                and = " AND ";
            }
            if let Some(job_type) = filter.job_type {
                query.push(and).push("j.job_type = ").push_bind(job_type);
                and = " AND ";
            }
            if let Some(before) = filter.before {
                query.push(and).push(rows.key).push(" < ").push_bind(Id(before));
            }
            query.push(format_args!(" ORDER BY {} DESC LIMIT ", rows.key)).push_bind(filter.limit);
            let rows = query.build().fetch_all(p).await?;
            rows.iter().map(|row| job_from_row!(row)).collect()
        })
    }

    /// Running jobs whose lease ran out, longest-expired first.
    pub(crate) async fn expired_leases(
        &self,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Uuid>, sqlx::Error> {
        on_pool!(self, p => {
            let ids: Vec<Id> = sqlx::query_scalar(
                "SELECT id FROM job_queue WHERE status = 'running' AND lease_expires_at < $1 \
                 ORDER BY lease_expires_at LIMIT $2",
            )
            .bind(Ts(now))
            .bind(limit)
            .fetch_all(p)
            .await?;
            Ok(ids.into_iter().map(|id| id.0).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The states the generated column names (migration 0025) are those the list reads
    /// through it.
    #[test]
    fn the_index_apart_holds_the_states_the_list_reads_through_it() {
        for migration in [
            include_str!("../../../migrations/postgres/0025_live_jobs.sql"),
            include_str!("../../../migrations/sqlite/0025_live_jobs.sql"),
        ] {
            let case = migration
                .split("CASE WHEN status IN (")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .expect("the generated column's states");
            for state in JobState::ALL {
                let named = case.contains(&format!("'{state}'"));
                assert_eq!(named, listed_apart(state), "{state}");
            }
        }
    }

    /// Where the list finds the jobs in each state.
    const PLANS: [(JobState, &str); 4] = [
        (JobState::Failed, "jobs_listed_apart"),
        (JobState::Queued, "job_queue_pkey"),
        (JobState::Running, "job_queue_running"),
        (JobState::Succeeded, "jobs_pkey"),
    ];

    fn list_sql(state: JobState, sqlite: bool) -> String {
        let rows = state_rows(Some(state), sqlite);
        format!(
            "SELECT j.id{} WHERE {} ORDER BY {} DESC LIMIT 50",
            rows.from,
            rows.condition.unwrap_or_default(),
            rows.key
        )
    }

    /// SQLite's planner, with no statistics, reads each state's jobs through its index (its
    /// primary key's is `sqlite_autoindex_jobs_1`).
    #[tokio::test]
    async fn sqlite_reads_each_state_through_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_data_dir(dir.path()).await.unwrap();
        crate::migrate::run(&db).await.unwrap();
        let Database::Sqlite(lite) = &db else {
            unreachable!("a data directory opens SQLite")
        };
        for (state, index) in PLANS {
            let index = index.replace("jobs_pkey", "sqlite_autoindex_jobs_1");
            let sql = format!("EXPLAIN QUERY PLAN {}", list_sql(state, true));
            let rows = sqlx::query(&sql).fetch_all(lite.pool()).await.unwrap();
            let plan: Vec<String> = rows.iter().map(|r| r.get("detail")).collect();
            let plan = plan.join("\n");
            assert!(plan.contains(&index), "{state}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{state}: {plan}");
        }
    }

    /// PostgreSQL's planner, on a table of mostly succeeded jobs and a few in each other
    /// state, reads each state's jobs through its index.
    #[tokio::test]
    async fn postgres_reads_each_state_through_its_index() {
        let (scratch, _db, pool) = postgres::scratch("stepwise_listed_apart").await;
        sqlx::query(
            "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
             required_capabilities, max_attempts, next_attempt_at, created_at, updated_at, \
             claimed_by, lease_expires_at) \
             SELECT gen_random_uuid(), 'task', s, 0, '{}', 'o/r', '[\"codex\"]', 3, now(), \
               now(), now(), \
               CASE WHEN s = 'running' THEN 'w' END, CASE WHEN s = 'running' THEN now() END \
             FROM (SELECT CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 100 = 1 THEN 'queued' \
                    WHEN g % 500 = 2 THEN 'running' ELSE 'succeeded' END AS s \
                   FROM generate_series(1, 20000) AS g) AS states",
        )
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO job_queue (id, priority, created_at, job_type, repository, \
             required_capabilities, next_attempt_at, status, attempt, updated_at, claimed_by, \
             lease_expires_at) \
             SELECT id, priority, created_at, job_type, repository, required_capabilities, \
               next_attempt_at, status, attempt, updated_at, claimed_by, lease_expires_at \
             FROM jobs WHERE status IN ('queued', 'running')",
        )
        .execute(&pool)
        .await
        .unwrap();
        for table in ["jobs", "job_queue"] {
            sqlx::query(&format!("ANALYZE {table}"))
                .execute(&pool)
                .await
                .unwrap();
        }
        for (state, index) in PLANS {
            let sql = format!("EXPLAIN {}", list_sql(state, false));
            let plan: Vec<String> = sqlx::query_scalar(&sql).fetch_all(&pool).await.unwrap();
            let plan = plan.join("\n");
            assert!(plan.contains(index), "{state}: {plan}");
            assert!(!plan.contains("Seq Scan"), "{state}: {plan}");
            assert!(!plan.contains("Sort"), "{state}: {plan}");
        }
        pool.close().await;
        scratch.drop_database().await.unwrap();
    }
}
