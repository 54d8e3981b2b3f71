//! The SQL of the queue, and the only place that has any. Statements that both backends
//! understand verbatim (sqlx binds `$N` on SQLite too) are written once and run through
//! [`on_tx!`] / [`on_pool!`], which expand the same code for each connection type; only the
//! row locking and the claim differ per backend.

mod types;

use chrono::{DateTime, Utc};
use contract::{Artifact, EventLevel, Job, JobEvent, JobState};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row, Sqlite, SqliteConnection, Transaction};
use uuid::Uuid;

use crate::database::Database;
use crate::machine::PendingEvent;
use crate::notify::{CHANNEL, Notification, NotificationKind};
use crate::tokens::{NewToken, Role, TokenKind, TokenRecord};
pub(crate) use types::{Id, Ts, ts};

/// Runs `$body` with `$c` bound to the transaction's connection, whichever the backend.
macro_rules! on_tx {
    ($tx:expr, $c:ident => $body:expr) => {
        match &mut $tx.conn {
            TxConn::Sqlite(t) => {
                let $c: &mut SqliteConnection = &mut **t;
                $body
            }
            TxConn::Postgres(t) => {
                let $c: &mut PgConnection = &mut **t;
                $body
            }
        }
    };
}

/// Runs `$body` with `$p` bound to the pool, whichever the backend.
macro_rules! on_pool {
    ($db:expr, $p:ident => $body:expr) => {
        match $db {
            Database::Sqlite($p) => $body,
            Database::Postgres($p) => $body,
        }
    };
}

macro_rules! job_columns {
    () => {
        "id, job_type, status, priority, payload, affinity_key, required_capabilities, \
         created_by_user_id, attempt, max_attempts, next_attempt_at, claimed_by, \
         lease_expires_at, cancel_requested_at, cancel_requested_by_user_id, cancel_reason, \
         result_summary, error_message, started_at, finished_at, created_at, updated_at"
    };
}

macro_rules! event_columns {
    () => {
        "id, job_id, kind, level, message, payload, created_at"
    };
}

macro_rules! artifact_columns {
    () => {
        "id, job_id, name, size, content_type, sha256, created_at"
    };
}

macro_rules! token_columns {
    () => {
        "id, name, kind, role, token_hash, token_prefix, capabilities, allowed_repositories, \
         allowed_job_types, created_at, last_used_at, revoked_at"
    };
}

fn decode_err(error: impl std::error::Error + Send + Sync + 'static) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

fn count(n: i32) -> Result<u32, sqlx::Error> {
    u32::try_from(n).map_err(decode_err)
}

fn int(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

// Decoders are macros rather than generic functions: expanded inside an `on_tx!`/`on_pool!`
// arm, the row type is concrete, which spares a page of trait bounds per decoder.
macro_rules! job_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<Job, sqlx::Error> {
            Ok(Job {
                id: row.try_get::<Id, _>("id")?.0.to_string(),
                job_type: row.try_get("job_type")?,
                status: row
                    .try_get::<String, _>("status")?
                    .parse::<JobState>()
                    .map_err(decode_err)?,
                priority: row.try_get("priority")?,
                payload: row.try_get::<Json<Value>, _>("payload")?.0,
                affinity_key: row.try_get("affinity_key")?,
                required_capabilities: row
                    .try_get::<Json<Vec<String>>, _>("required_capabilities")?
                    .0,
                created_by_user_id: row.try_get("created_by_user_id")?,
                attempt: count(row.try_get("attempt")?)?,
                max_attempts: count(row.try_get("max_attempts")?)?,
                next_attempt_at: row.try_get::<Ts, _>("next_attempt_at")?.0,
                claimed_by: row.try_get("claimed_by")?,
                lease_expires_at: row
                    .try_get::<Option<Ts>, _>("lease_expires_at")?
                    .map(|t| t.0),
                cancel_requested_at: row
                    .try_get::<Option<Ts>, _>("cancel_requested_at")?
                    .map(|t| t.0),
                cancel_requested_by_user_id: row.try_get("cancel_requested_by_user_id")?,
                cancel_reason: row.try_get("cancel_reason")?,
                result_summary: row.try_get("result_summary")?,
                error_message: row.try_get("error_message")?,
                started_at: row.try_get::<Option<Ts>, _>("started_at")?.map(|t| t.0),
                finished_at: row.try_get::<Option<Ts>, _>("finished_at")?.map(|t| t.0),
                created_at: row.try_get::<Ts, _>("created_at")?.0,
                updated_at: row.try_get::<Ts, _>("updated_at")?.0,
            })
        })()
    }};
}

macro_rules! event_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<JobEvent, sqlx::Error> {
            Ok(JobEvent {
                id: row.try_get("id")?,
                job_id: row.try_get::<Id, _>("job_id")?.0.to_string(),
                kind: row.try_get("kind")?,
                level: row
                    .try_get::<String, _>("level")?
                    .parse::<EventLevel>()
                    .map_err(decode_err)?,
                message: row.try_get("message")?,
                payload: row.try_get::<Json<Map<String, Value>>, _>("payload")?.0,
                created_at: row.try_get::<Ts, _>("created_at")?.0,
            })
        })()
    }};
}

macro_rules! artifact_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<Artifact, sqlx::Error> {
            Ok(Artifact {
                id: row.try_get::<Id, _>("id")?.0.to_string(),
                job_id: row.try_get::<Id, _>("job_id")?.0.to_string(),
                name: row.try_get("name")?,
                size: u64::try_from(row.try_get::<i64, _>("size")?).map_err(decode_err)?,
                content_type: row.try_get("content_type")?,
                sha256: row.try_get("sha256")?,
                created_at: row.try_get::<Ts, _>("created_at")?.0,
            })
        })()
    }};
}

macro_rules! token_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<TokenRecord, sqlx::Error> {
            let list = |name: &str| -> Result<Option<Vec<String>>, sqlx::Error> {
                Ok(row
                    .try_get::<Option<Json<Vec<String>>>, _>(name)?
                    .map(|j| j.0))
            };
            Ok(TokenRecord {
                id: row.try_get::<Id, _>("id")?.0.to_string(),
                name: row.try_get("name")?,
                kind: row
                    .try_get::<String, _>("kind")?
                    .parse::<TokenKind>()
                    .map_err(decode_err)?,
                role: row
                    .try_get::<Option<String>, _>("role")?
                    .map(|r| r.parse::<Role>())
                    .transpose()
                    .map_err(decode_err)?,
                token_hash: row.try_get("token_hash")?,
                token_prefix: row.try_get("token_prefix")?,
                capabilities: list("capabilities")?,
                allowed_repositories: list("allowed_repositories")?,
                allowed_job_types: list("allowed_job_types")?,
                created_at: row.try_get::<Ts, _>("created_at")?.0,
                last_used_at: row.try_get::<Option<Ts>, _>("last_used_at")?.map(|t| t.0),
                revoked_at: row.try_get::<Option<Ts>, _>("revoked_at")?.map(|t| t.0),
            })
        })()
    }};
}

enum TxConn {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

/// One write transaction, collecting the notifications to send when it commits.
pub(crate) struct Tx {
    conn: TxConn,
    origin: Uuid,
    notes: Vec<Notification>,
}

impl Tx {
    /// SQLite: `BEGIN IMMEDIATE` takes the write lock up front. A deferred transaction that
    /// reads and then writes could fail with SQLITE_BUSY when another writer got in between
    /// (WAL cannot upgrade a stale read snapshot); with IMMEDIATE, writers queue on the busy
    /// timeout instead, and a row read inside is as good as locked.
    pub(crate) async fn begin(db: &Database, origin: Uuid) -> Result<Tx, sqlx::Error> {
        let conn = match db {
            Database::Sqlite(pool) => TxConn::Sqlite(pool.begin_with("BEGIN IMMEDIATE").await?),
            Database::Postgres(pool) => TxConn::Postgres(pool.begin().await?),
        };
        Ok(Tx {
            conn,
            origin,
            notes: Vec::new(),
        })
    }

    pub(crate) fn notify(&mut self, job_id: &str, kind: NotificationKind) {
        self.notes.push(Notification {
            job_id: job_id.to_string(),
            kind,
        });
    }

    /// Commits, and returns the notifications for the caller to broadcast in-process.
    /// On PostgreSQL they are first handed to `pg_notify`, which delivers them to the other
    /// replicas exactly when this commit becomes visible.
    pub(crate) async fn commit(mut self) -> Result<Vec<Notification>, sqlx::Error> {
        if let TxConn::Postgres(t) = &mut self.conn
            && !self.notes.is_empty()
        {
            let payloads: Vec<String> = self.notes.iter().map(|n| n.encode(self.origin)).collect();
            sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
                .bind(CHANNEL)
                .bind(&payloads)
                .execute(&mut **t)
                .await?;
        }
        match self.conn {
            TxConn::Sqlite(t) => t.commit().await?,
            TxConn::Postgres(t) => t.commit().await?,
        }
        Ok(self.notes)
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self.conn {
            TxConn::Sqlite(t) => t.rollback().await,
            TxConn::Postgres(t) => t.rollback().await,
        }
    }

    /// The job, locked until commit: `FOR UPDATE` on PostgreSQL; on SQLite the IMMEDIATE
    /// transaction already excludes every other writer.
    pub(crate) async fn lock_job(&mut self, id: Uuid) -> Result<Option<Job>, sqlx::Error> {
        let sql = match self.conn {
            TxConn::Sqlite(_) => concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"),
            TxConn::Postgres(_) => concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs WHERE id = $1 FOR UPDATE"
            ),
        };
        on_tx!(self, c => {
            match sqlx::query(sql).bind(Id(id)).fetch_optional(&mut *c).await? {
                Some(row) => Ok(Some(job_from_row!(&row)?)),
                None => Ok(None),
            }
        })
    }

    pub(crate) async fn insert_job(
        &mut self,
        job: &Job,
        repository: &str,
    ) -> Result<(), sqlx::Error> {
        let id = parse_id(&job.id)?;
        on_tx!(self, c => {
            sqlx::query(concat!(
                "INSERT INTO jobs (",
                job_columns!(),
                ", repository) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                 $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)"
            ))
            .bind(Id(id))
            .bind(&job.job_type)
            .bind(job.status.as_str())
            .bind(job.priority)
            .bind(Json(&job.payload))
            .bind(&job.affinity_key)
            .bind(Json(&job.required_capabilities))
            .bind(&job.created_by_user_id)
            .bind(int(job.attempt))
            .bind(int(job.max_attempts))
            .bind(Ts(job.next_attempt_at))
            .bind(&job.claimed_by)
            .bind(ts(job.lease_expires_at))
            .bind(ts(job.cancel_requested_at))
            .bind(&job.cancel_requested_by_user_id)
            .bind(&job.cancel_reason)
            .bind(&job.result_summary)
            .bind(&job.error_message)
            .bind(ts(job.started_at))
            .bind(ts(job.finished_at))
            .bind(Ts(job.created_at))
            .bind(Ts(job.updated_at))
            .bind(repository)
            .execute(&mut *c)
            .await
            .map(drop)
        })
    }

    /// Writes back every field a transition may change.
    pub(crate) async fn save_job(&mut self, job: &Job) -> Result<(), sqlx::Error> {
        let id = parse_id(&job.id)?;
        on_tx!(self, c => {
            sqlx::query(
                "UPDATE jobs SET status = $2, attempt = $3, next_attempt_at = $4, \
                 claimed_by = $5, lease_expires_at = $6, cancel_requested_at = $7, \
                 cancel_requested_by_user_id = $8, cancel_reason = $9, result_summary = $10, \
                 error_message = $11, started_at = $12, finished_at = $13, updated_at = $14 \
                 WHERE id = $1",
            )
            .bind(Id(id))
            .bind(job.status.as_str())
            .bind(int(job.attempt))
            .bind(Ts(job.next_attempt_at))
            .bind(&job.claimed_by)
            .bind(ts(job.lease_expires_at))
            .bind(ts(job.cancel_requested_at))
            .bind(&job.cancel_requested_by_user_id)
            .bind(&job.cancel_reason)
            .bind(&job.result_summary)
            .bind(&job.error_message)
            .bind(ts(job.started_at))
            .bind(ts(job.finished_at))
            .bind(Ts(job.updated_at))
            .execute(&mut *c)
            .await
            .map(drop)
        })
    }

    /// Appends an event and queues its notification.
    ///
    /// Event ids are the cursor of a job's event stream, so within one job they must become
    /// visible in id order: a reader that has seen id N of a job must never later find a
    /// smaller id of that job appear. Every caller holds the job's row lock (or inserts the
    /// job's first event with the row itself, invisible until commit), so two transactions
    /// of one job insert and commit one after the other, and the second draws its id after
    /// the first committed. Across jobs ids may commit out of order (PostgreSQL hands out
    /// sequence values at insert time); no reader pages events across jobs by id, and one
    /// that ever must needs a visibility watermark rather than a global lock, which would
    /// serialize every write of the cluster.
    pub(crate) async fn insert_event(
        &mut self,
        job_id: &str,
        event: &PendingEvent,
        now: DateTime<Utc>,
    ) -> Result<JobEvent, sqlx::Error> {
        let id = parse_id(job_id)?;
        let event_id: i64 = on_tx!(self, c => {
            sqlx::query_scalar(
                "INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            )
            .bind(Id(id))
            .bind(&event.kind)
            .bind(event.level.as_str())
            .bind(&event.message)
            .bind(Json(&event.payload))
            .bind(Ts(now))
            .fetch_one(&mut *c)
            .await?
        });
        self.notify(job_id, NotificationKind::EventAppended { event_id });
        Ok(JobEvent {
            id: event_id,
            job_id: job_id.to_string(),
            kind: event.kind.clone(),
            level: event.level,
            message: event.message.clone(),
            payload: event.payload.clone(),
            created_at: now,
        })
    }

    pub(crate) async fn last_event(
        &mut self,
        job_id: Uuid,
        kind: &str,
    ) -> Result<Option<JobEvent>, sqlx::Error> {
        on_tx!(self, c => {
            let row = sqlx::query(concat!(
                "SELECT ",
                event_columns!(),
                " FROM job_events WHERE job_id = $1 AND kind = $2 ORDER BY id DESC LIMIT 1"
            ))
            .bind(Id(job_id))
            .bind(kind)
            .fetch_optional(&mut *c)
            .await?;
            row.map(|row| event_from_row!(&row)).transpose()
        })
    }

    /// Picks the best claimable job and leases it, in one statement.
    ///
    /// PostgreSQL: the subquery locks its pick `FOR UPDATE SKIP LOCKED`, so concurrent
    /// claimers each skip rows another is taking and never block on or double-claim one.
    /// SQLite: the statement runs inside `BEGIN IMMEDIATE`, and SQLite admits one writer at
    /// a time, so no other claim can run between the subquery's pick and the update.
    pub(crate) async fn claim(&mut self, claim: &ClaimSql<'_>) -> Result<Option<Job>, sqlx::Error> {
        let row = match &mut self.conn {
            TxConn::Postgres(t) => sqlx::query(concat!(
                "UPDATE jobs SET status = 'running', claimed_by = $1, lease_expires_at = $2, \
                     attempt = attempt + 1, started_at = COALESCE(started_at, $3), updated_at = $3 \
                     WHERE id = (\
                       SELECT id FROM jobs \
                       WHERE status = 'queued' AND next_attempt_at <= $3 \
                         AND cancel_requested_at IS NULL \
                         AND required_capabilities <@ $4 \
                         AND ($5::text[] IS NULL OR job_type = ANY($5)) \
                         AND ($6::text[] IS NULL OR repository = ANY($6)) \
                       ORDER BY priority DESC, created_at, id \
                       LIMIT 1 \
                       FOR UPDATE SKIP LOCKED) \
                     AND status = 'queued' \
                     RETURNING ",
                job_columns!()
            ))
            .bind(claim.worker_id)
            .bind(Ts(claim.lease_until))
            .bind(Ts(claim.now))
            .bind(Json(claim.capabilities))
            .bind(claim.allowed_types)
            .bind(claim.allowed_repositories)
            .fetch_optional(&mut **t)
            .await?
            .map(|row| job_from_row!(&row))
            .transpose()?,
            // INDEXED BY: left to itself SQLite picks jobs_by_status and sorts every queued
            // row (a temp B-tree per claim, so claims slow down as the queue grows); walking
            // jobs_claim_order stops at the first claimable job.
            TxConn::Sqlite(t) => sqlx::query(concat!(
                "UPDATE jobs SET status = 'running', claimed_by = $1, lease_expires_at = $2, \
                     attempt = attempt + 1, started_at = COALESCE(started_at, $3), updated_at = $3 \
                     WHERE id = (\
                       SELECT j.id FROM jobs j INDEXED BY jobs_claim_order \
                       WHERE j.status = 'queued' AND j.next_attempt_at <= $3 \
                         AND j.cancel_requested_at IS NULL \
                         AND NOT EXISTS (\
                           SELECT 1 FROM json_each(j.required_capabilities) AS r \
                           WHERE r.value NOT IN (SELECT value FROM json_each($4))) \
                         AND ($5 IS NULL OR j.job_type IN (SELECT value FROM json_each($5))) \
                         AND ($6 IS NULL OR j.repository IN (SELECT value FROM json_each($6))) \
                       ORDER BY j.priority DESC, j.created_at, j.id \
                       LIMIT 1) \
                     AND status = 'queued' \
                     RETURNING ",
                job_columns!()
            ))
            .bind(claim.worker_id)
            .bind(Ts(claim.lease_until))
            .bind(Ts(claim.now))
            .bind(Json(claim.capabilities))
            .bind(claim.allowed_types.map(Json))
            .bind(claim.allowed_repositories.map(Json))
            .fetch_optional(&mut **t)
            .await?
            .map(|row| job_from_row!(&row))
            .transpose()?,
        };
        Ok(row)
    }

    /// Inserts or, for a name the job already has, replaces (keeping the artifact's id).
    pub(crate) async fn upsert_artifact(&mut self, a: &Artifact) -> Result<Artifact, sqlx::Error> {
        let id = parse_id(&a.id)?;
        let job_id = parse_id(&a.job_id)?;
        let size = i64::try_from(a.size).map_err(decode_err)?;
        on_tx!(self, c => {
            let row = sqlx::query(concat!(
                "INSERT INTO artifacts (",
                artifact_columns!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (job_id, name) DO UPDATE SET size = excluded.size, \
                 content_type = excluded.content_type, sha256 = excluded.sha256, \
                 created_at = excluded.created_at \
                 RETURNING ",
                artifact_columns!()
            ))
            .bind(Id(id))
            .bind(Id(job_id))
            .bind(&a.name)
            .bind(size)
            .bind(&a.content_type)
            .bind(&a.sha256)
            .bind(Ts(a.created_at))
            .fetch_one(&mut *c)
            .await?;
            artifact_from_row!(&row)
        })
    }
}

/// The inputs of the claim statement.
pub(crate) struct ClaimSql<'a> {
    pub worker_id: &'a str,
    pub capabilities: &'a [String],
    pub allowed_types: Option<&'a [String]>,
    pub allowed_repositories: Option<&'a [String]>,
    pub now: DateTime<Utc>,
    pub lease_until: DateTime<Utc>,
}

fn parse_id(id: &str) -> Result<Uuid, sqlx::Error> {
    Uuid::parse_str(id).map_err(decode_err)
}

/// The filter of a job listing, already parsed.
pub(crate) struct ListSql<'a> {
    pub status: Option<JobState>,
    pub job_type: Option<&'a str>,
    pub before: Option<Uuid>,
    pub limit: i64,
}

// Reads run on the pool directly: on SQLite in WAL mode they do not wait for the writer.
impl Database {
    pub(crate) async fn get_job(&self, id: Uuid) -> Result<Option<Job>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"))
                .bind(Id(id))
                .fetch_optional(p)
                .await?;
            row.map(|row| job_from_row!(&row)).transpose()
        })
    }

    /// Newest first. The WHERE clause is built for the filters actually given, so each
    /// combination is a plain indexed range scan rather than a `$n IS NULL OR …` plan.
    pub(crate) async fn list_jobs(&self, filter: &ListSql<'_>) -> Result<Vec<Job>, sqlx::Error> {
        let mut conditions = Vec::new();
        let mut n = 0;
        let mut next = || {
            n += 1;
            n
        };
        if filter.status.is_some() {
            conditions.push(format!("status = ${}", next()));
        }
        if filter.job_type.is_some() {
            conditions.push(format!("job_type = ${}", next()));
        }
        if filter.before.is_some() {
            conditions.push(format!("id < ${}", next()));
        }
        let limit = next();
        let where_clause = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let sql = format!(
            concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs{} ORDER BY id DESC LIMIT ${}"
            ),
            where_clause, limit
        );
        on_pool!(self, p => {
            let mut query = sqlx::query(&sql);
            if let Some(status) = filter.status {
                query = query.bind(status.as_str());
            }
            if let Some(job_type) = filter.job_type {
                query = query.bind(job_type);
            }
            if let Some(before) = filter.before {
                query = query.bind(Id(before));
            }
            let rows = query.bind(filter.limit).fetch_all(p).await?;
            rows.iter().map(|row| job_from_row!(row)).collect()
        })
    }

    pub(crate) async fn list_events(
        &self,
        job_id: Uuid,
        after: i64,
        limit: i64,
    ) -> Result<Vec<JobEvent>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(concat!(
                "SELECT ",
                event_columns!(),
                " FROM job_events WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3"
            ))
            .bind(Id(job_id))
            .bind(after)
            .bind(limit)
            .fetch_all(p)
            .await?;
            rows.iter().map(|row| event_from_row!(row)).collect()
        })
    }

    pub(crate) async fn list_artifacts(&self, job_id: Uuid) -> Result<Vec<Artifact>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(concat!(
                "SELECT ",
                artifact_columns!(),
                " FROM artifacts WHERE job_id = $1 ORDER BY name"
            ))
            .bind(Id(job_id))
            .fetch_all(p)
            .await?;
            rows.iter().map(|row| artifact_from_row!(row)).collect()
        })
    }

    pub(crate) async fn get_artifact(
        &self,
        job_id: Uuid,
        name: &str,
    ) -> Result<Option<Artifact>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!(
                "SELECT ",
                artifact_columns!(),
                " FROM artifacts WHERE job_id = $1 AND name = $2"
            ))
            .bind(Id(job_id))
            .bind(name)
            .fetch_optional(p)
            .await?;
            row.map(|row| artifact_from_row!(&row)).transpose()
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
                "SELECT id FROM jobs WHERE status = 'running' AND lease_expires_at < $1 \
                 ORDER BY lease_expires_at LIMIT $2",
            )
            .bind(Ts(now))
            .bind(limit)
            .fetch_all(p)
            .await?;
            Ok(ids.into_iter().map(|id| id.0).collect())
        })
    }

    pub(crate) async fn insert_token(
        &self,
        id: Uuid,
        token: &NewToken,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!(
                "INSERT INTO api_tokens (",
                token_columns!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, NULL) RETURNING ",
                token_columns!()
            ))
            .bind(Id(id))
            .bind(&token.name)
            .bind(token.kind.as_str())
            .bind(token.role.map(Role::as_str))
            .bind(&token.token_hash)
            .bind(&token.token_prefix)
            .bind(token.capabilities.as_ref().map(Json))
            .bind(token.allowed_repositories.as_ref().map(Json))
            .bind(token.allowed_job_types.as_ref().map(Json))
            .bind(Ts(now))
            .fetch_one(p)
            .await?;
            token_from_row!(&row)
        })
    }

    pub(crate) async fn find_token_by_hash(
        &self,
        hash: &str,
    ) -> Result<Option<TokenRecord>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!(
                "SELECT ",
                token_columns!(),
                " FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL"
            ))
            .bind(hash)
            .fetch_optional(p)
            .await?;
            row.map(|row| token_from_row!(&row)).transpose()
        })
    }

    pub(crate) async fn list_tokens(&self) -> Result<Vec<TokenRecord>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(concat!(
                "SELECT ",
                token_columns!(),
                " FROM api_tokens ORDER BY id DESC"
            ))
            .fetch_all(p)
            .await?;
            rows.iter().map(|row| token_from_row!(row)).collect()
        })
    }

    /// Sets `revoked_at` once; revoking again keeps the first time.
    pub(crate) async fn revoke_token(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<TokenRecord>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!(
                "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 \
                 RETURNING ",
                token_columns!()
            ))
            .bind(Id(id))
            .bind(Ts(now))
            .fetch_optional(p)
            .await?;
            row.map(|row| token_from_row!(&row)).transpose()
        })
    }

    pub(crate) async fn touch_token(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        on_pool!(self, p => {
            let done = sqlx::query("UPDATE api_tokens SET last_used_at = $2 WHERE id = $1")
                .bind(Id(id))
                .bind(Ts(now))
                .execute(p)
                .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    pub(crate) async fn count_active_tokens(&self) -> Result<i64, sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NULL")
                .fetch_one(p)
                .await
        })
    }
}
