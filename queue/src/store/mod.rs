//! The SQL of the queue, and the only place that has any. Statements are written once with
//! `$N` placeholders, which every driver here binds by number; only the row locking and
//! the claim differ per backend. Reads go through the sqlx pools ([`on_pool!`] expands the
//! same code for each); writes go through [`Tx`], on PostgreSQL a pooled sqlx transaction
//! and on SQLite the single write connection of [`sqlite`].
//!
//! Too long, and known to be: issue 16 splits the SQL per concern and gives each backend a
//! driver module of its own behind one interface.

mod sqlite;
mod types;

use chrono::{DateTime, Utc};
use contract::{Artifact, EventLevel, Job, JobEvent, JobState, StepUsage};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row, Transaction};
use uuid::Uuid;

use crate::QueueError;
use crate::database::{Database, SqliteDb};
use crate::machine::{self, PendingEvent};
use crate::notify::{Notification, NotificationKind};
use crate::tokens::{NewToken, Role, SessionPurpose, TokenKind, TokenRecord};
use crate::workers::WorkerRecord;
pub(crate) use sqlite::SqliteWriter;
use sqlite::{RowExt, SqliteTx};
pub(crate) use types::{Id, Ts, ts};

/// Runs `$body` with `$p` bound to the pool, whichever the backend.
/// The size of the pieces an artifact is stored in on PostgreSQL: big enough that a 32 MiB
/// upload is 128 rows, small enough that a reader holds little at a time.
pub(crate) const ARTIFACT_CHUNK_BYTES: usize = 256 * 1024;

/// The advisory lock that serializes making the first token across replicas (an arbitrary
/// constant: "stepwise" in ASCII, as one 64-bit key).
const FIRST_TOKEN_LOCK: i64 = 0x7374_6570_7769_7365;

macro_rules! on_pool {
    ($db:expr, $p:ident => $body:expr) => {
        match $db {
            Database::Sqlite(db) => {
                let $p = &db.pool;
                $body
            }
            Database::Postgres($p) => $body,
        }
    };
}

macro_rules! job_columns {
    () => {
        "id, job_type, status, priority, payload, affinity_key, required_capabilities, \
         created_by_user_id, attempt, max_attempts, next_attempt_at, claimed_by, \
         lease_expires_at, cancel_requested_at, cancel_requested_by_user_id, cancel_reason, \
         result_summary, error_message, started_at, finished_at, created_at, updated_at, usage"
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

/// Binds a new token's ten columns, in `token_columns!` order, to `$query`.
macro_rules! bind_token {
    ($query:expr, $id:expr, $token:expr, $now:expr) => {
        $query
            .bind(Id($id))
            .bind(&$token.name)
            .bind($token.kind.as_str())
            .bind($token.role.map(Role::as_str))
            .bind(&$token.token_hash)
            .bind(&$token.token_prefix)
            .bind($token.capabilities.as_ref().map(Json))
            .bind($token.allowed_repositories.as_ref().map(Json))
            .bind($token.allowed_job_types.as_ref().map(Json))
            .bind(Ts($now))
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

// Decoders are macros rather than generic functions: expanded where the row type is
// concrete (an sqlx row, or a rusqlite row through `sqlite::RowExt`), they spare a page of
// trait bounds per decoder.
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
                usage: row
                    .try_get::<Option<Json<StepUsage>>, _>("usage")?
                    .map(|j| j.0),
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
    Sqlite(SqliteTx),
    Postgres(Transaction<'static, Postgres>),
}

/// One write transaction, collecting the notifications to send when it commits.
pub(crate) struct Tx {
    conn: TxConn,
    notes: Vec<Notification>,
}

/// The fields a transition may change, in the order of `$2`..`$14` of [`SAVE_JOB`] and
/// [`INSERT_JOB`].
fn state_args(job: &Job) -> [Arg<'_>; 13] {
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

/// The fields only a new job sets, in the order of `$15`..`$23` of [`INSERT_JOB`].
fn created_args<'a>(job: &'a Job, repository: &'a str) -> Result<[Arg<'a>; 9], sqlx::Error> {
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

/// `$1`..`$7` of the claim statements.
fn claim_args<'a>(claim: &'a ClaimSql<'a>) -> Result<Vec<Arg<'a>>, sqlx::Error> {
    Ok(vec![
        Arg::text(claim.worker_id),
        Arg::at(claim.lease_until),
        Arg::at(claim.now),
        Arg::json(&claim.capabilities)?,
        Arg::TextList(claim.allowed_types),
        Arg::TextList(claim.allowed_repositories),
        Arg::BigInt(i64::from(claim.limit)),
    ])
}

/// The order claims take jobs in: highest priority, then oldest, then id.
fn claim_order(a: &Job, b: &Job) -> std::cmp::Ordering {
    (b.priority, a.created_at, &a.id).cmp(&(a.priority, b.created_at, &b.id))
}

/// One bound value of a write statement; each driver binds it its own way, so a statement's
/// arguments are listed once for both backends.
pub(crate) enum Arg<'a> {
    Id(Uuid),
    Text(Option<&'a str>),
    Int(i32),
    BigInt(i64),
    Ts(Option<DateTime<Utc>>),
    /// PostgreSQL `jsonb`; SQLite JSON `TEXT`.
    Json(Value),
    /// PostgreSQL `text[]`; SQLite a JSON array as `TEXT` (read with `json_each`).
    TextList(Option<&'a [String]>),
}

impl<'a> Arg<'a> {
    fn text(value: &'a str) -> Self {
        Arg::Text(Some(value))
    }

    fn opt(value: &'a Option<String>) -> Self {
        Arg::Text(value.as_deref())
    }

    fn at(value: DateTime<Utc>) -> Self {
        Arg::Ts(Some(value))
    }

    fn json(value: &impl serde::Serialize) -> Result<Self, sqlx::Error> {
        serde_json::to_value(value)
            .map(Arg::Json)
            .map_err(decode_err)
    }
}

fn bind_pg<'q>(
    mut query: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    args: &'q [Arg<'q>],
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    for arg in args {
        query = match arg {
            Arg::Id(id) => query.bind(Id(*id)),
            Arg::Text(text) => query.bind(*text),
            Arg::Int(n) => query.bind(*n),
            Arg::BigInt(n) => query.bind(*n),
            Arg::Ts(at) => query.bind(ts(*at)),
            Arg::Json(value) => query.bind(Json(value)),
            Arg::TextList(list) => query.bind(*list),
        };
    }
    query
}

/// Runs one statement in a PostgreSQL transaction and decodes every row it returns.
async fn pg_rows<T>(
    conn: &mut PgConnection,
    sql: &str,
    args: &[Arg<'_>],
    decode: impl FnMut(&PgRow) -> Result<T, sqlx::Error>,
) -> Result<Vec<T>, QueueError> {
    let rows = bind_pg(sqlx::query(sql), args).fetch_all(conn).await?;
    Ok(rows.iter().map(decode).collect::<Result<_, _>>()?)
}

/// Runs one statement on the SQLite writer and decodes every row it returns.
fn sqlite_rows<T>(
    tx: &SqliteTx,
    sql: &str,
    args: &[Arg<'_>],
    mut decode: impl FnMut(&rusqlite::Row<'_>) -> Result<T, sqlx::Error>,
) -> Result<Vec<T>, QueueError> {
    let mut stmt = tx.conn().prepare_cached(sql)?;
    sqlite::bind(&mut stmt, args)?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode(row)?);
    }
    Ok(out)
}

const LOCK_JOB_SQLITE: &str = concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1");
const LOCK_JOB_POSTGRES: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE id = $1 FOR UPDATE"
);

/// The columns of [`state_args`] come first, in its order, so both writes share it.
macro_rules! insert_job_sql {
    () => {
        "INSERT INTO jobs (id, status, attempt, next_attempt_at, claimed_by, \
         lease_expires_at, cancel_requested_at, cancel_requested_by_user_id, cancel_reason, \
         result_summary, error_message, started_at, finished_at, updated_at, job_type, \
         priority, payload, affinity_key, required_capabilities, created_by_user_id, \
         max_attempts, created_at, repository) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)"
    };
}

const INSERT_JOB: &str = insert_job_sql!();

/// PostgreSQL: the job and its first events (`$24`..`$27` arrays, inserted in their order)
/// in one statement, run outside an explicit transaction (a statement is atomic on its
/// own): one round trip instead of four.
const INSERT_JOB_WITH_EVENTS_POSTGRES: &str = concat!(
    "WITH job AS (",
    insert_job_sql!(),
    " RETURNING id) INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
     SELECT job.id, e.kind, e.level, e.message, e.payload, $22 \
     FROM job, unnest($24::text[], $25::text[], $26::text[], $27::jsonb[]) \
       WITH ORDINALITY AS e(kind, level, message, payload, n) \
     ORDER BY e.n RETURNING id"
);

const SAVE_JOB: &str = "UPDATE jobs SET status = $2, attempt = $3, next_attempt_at = $4, \
     claimed_by = $5, lease_expires_at = $6, cancel_requested_at = $7, \
     cancel_requested_by_user_id = $8, cancel_reason = $9, result_summary = $10, \
     error_message = $11, started_at = $12, finished_at = $13, updated_at = $14 \
     WHERE id = $1";

const LOCK_JOBS_POSTGRES: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE"
);

/// [`SAVE_JOB`] for many rows: one array per column, zipped by `unnest`.
const SAVE_JOBS_POSTGRES: &str = "UPDATE jobs AS j SET status = u.status, attempt = u.attempt, \
     next_attempt_at = u.next_attempt_at, claimed_by = u.claimed_by, \
     lease_expires_at = u.lease_expires_at, cancel_requested_at = u.cancel_requested_at, \
     cancel_requested_by_user_id = u.cancel_requested_by_user_id, \
     cancel_reason = u.cancel_reason, result_summary = u.result_summary, \
     error_message = u.error_message, started_at = u.started_at, \
     finished_at = u.finished_at, updated_at = u.updated_at \
     FROM unnest($1::uuid[], $2::text[], $3::int[], $4::timestamptz[], $5::text[], \
       $6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[], $10::text[], $11::text[], \
       $12::timestamptz[], $13::timestamptz[], $14::timestamptz[]) \
       AS u(id, status, attempt, next_attempt_at, claimed_by, lease_expires_at, \
       cancel_requested_at, cancel_requested_by_user_id, cancel_reason, result_summary, \
       error_message, started_at, finished_at, updated_at) \
     WHERE j.id = u.id";

/// [`SAVE_JOB`] guarded by the row's previous state (`$15`..`$27`, the same columns), with
/// the transition's events (`$28`..`$31` arrays, `$32` the time) appended in the same
/// statement; see `Database::swap_job`.
const SWAP_JOB_POSTGRES: &str = "WITH updated AS (\
       UPDATE jobs SET status = $2, attempt = $3, next_attempt_at = $4, claimed_by = $5, \
         lease_expires_at = $6, cancel_requested_at = $7, cancel_requested_by_user_id = $8, \
         cancel_reason = $9, result_summary = $10, error_message = $11, started_at = $12, \
         finished_at = $13, updated_at = $14 \
       WHERE id = $1 AND (status, attempt, next_attempt_at, claimed_by, lease_expires_at, \
         cancel_requested_at, cancel_requested_by_user_id, cancel_reason, result_summary, \
         error_message, started_at, finished_at, updated_at) \
         IS NOT DISTINCT FROM ($15::text, $16::int, $17::timestamptz, $18::text, \
         $19::timestamptz, $20::timestamptz, $21::text, $22::text, $23::text, $24::text, \
         $25::timestamptz, $26::timestamptz, $27::timestamptz) \
       RETURNING id), \
     appended AS (\
       INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
       SELECT updated.id, e.kind, e.level, e.message, e.payload, $32 \
       FROM updated, unnest($28::text[], $29::text[], $30::text[], $31::jsonb[]) \
         WITH ORDINALITY AS e(kind, level, message, payload, n) \
       ORDER BY e.n \
       RETURNING id) \
     SELECT (SELECT count(*) FROM updated) AS updated, \
       ARRAY(SELECT id FROM appended ORDER BY id) AS event_ids";

/// [`INSERT_EVENT`] for many rows, inserted in the order of the arrays.
const INSERT_EVENTS_POSTGRES: &str = "INSERT INTO job_events \
     (job_id, kind, level, message, payload, created_at) \
     SELECT e.job_id, e.kind, e.level, e.message, e.payload, $6 \
     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::jsonb[]) \
       WITH ORDINALITY AS e(job_id, kind, level, message, payload, n) \
     ORDER BY e.n RETURNING id";

const INSERT_EVENT: &str = "INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";

/// Only [`Tx::set_usage`] writes the column; see migration 0007 for why transitions don't.
const SET_USAGE: &str = "UPDATE jobs SET usage = $2 WHERE id = $1";

const LAST_EVENT: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM job_events WHERE job_id = $1 AND kind = $2 ORDER BY id DESC LIMIT 1"
);

/// Both claims lease up to `$7` jobs at once (the batched claim; a single claim is 1), and
/// return them in no particular order.
///
/// PostgreSQL: the subquery locks its pick `FOR UPDATE SKIP LOCKED`, so concurrent
/// claimers each skip rows another is taking and never block on or double-claim one. The
/// lock re-checks the subquery's conditions on the row's latest version, so the update
/// needs no second `status = 'queued'` test, which made the planner reach the row through
/// jobs_by_status and its dead entries instead of the primary key.
macro_rules! claim_postgres_sql {
    () => {
        concat!(
            "UPDATE jobs SET status = 'running', claimed_by = $1, lease_expires_at = $2, \
         attempt = attempt + 1, started_at = COALESCE(started_at, $3), updated_at = $3 \
         WHERE id = ANY(ARRAY(\
           SELECT id FROM jobs \
           WHERE status = 'queued' AND next_attempt_at <= $3 \
             AND cancel_requested_at IS NULL \
             AND required_capabilities <@ $4 \
             AND ($5::text[] IS NULL OR job_type = ANY($5)) \
             AND ($6::text[] IS NULL OR repository = ANY($6)) \
           ORDER BY priority DESC, created_at, id \
           LIMIT $7 \
           FOR UPDATE SKIP LOCKED)) \
         RETURNING ",
            job_columns!()
        )
    };
}

/// The PostgreSQL claim with the claims' `job.claimed` events, in one statement outside an
/// explicit transaction: one round trip instead of four. The event is the one
/// `machine::claimed_event` builds, written in SQL (the conformance suite compares them on
/// both backends); `$8` is the lease end as the JSON text Rust gives it.
const CLAIM_WITH_EVENTS_POSTGRES: &str = concat!(
    "WITH claimed AS (",
    claim_postgres_sql!(),
    "), appended AS (\
       INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
       SELECT id, 'job.claimed', 'info', \
         format('claimed by %s (attempt %s of %s)', claimed_by, attempt, max_attempts), \
         jsonb_build_object('workerId', claimed_by, 'attempt', attempt, \
           'leaseExpiresAt', $8::text), \
         $3 \
       FROM claimed \
       RETURNING id, job_id) \
     SELECT claimed.*, appended.id AS event_id \
     FROM claimed JOIN appended ON appended.job_id = claimed.id"
);

/// SQLite: the statement runs inside `BEGIN IMMEDIATE`, and SQLite admits one writer at a
/// time, so no other claim can run between the subquery's pick and the update.
/// INDEXED BY: left to itself SQLite picks jobs_by_status and sorts every queued row (a
/// temp B-tree per claim, so claims slow down as the queue grows); walking
/// jobs_claim_order stops at the first claimable job.
const CLAIM_SQLITE: &str = concat!(
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
             AND ($6 IS NULL OR j.repository IN (SELECT value FROM json_each($6))) \
           ORDER BY j.priority DESC, j.created_at, j.id \
           LIMIT $7) \
         AND status = 'queued' \
         RETURNING ",
    job_columns!()
);

const UPSERT_ARTIFACT: &str = concat!(
    "INSERT INTO artifacts (",
    artifact_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (job_id, name) DO UPDATE SET size = excluded.size, \
     content_type = excluded.content_type, sha256 = excluded.sha256, \
     created_at = excluded.created_at \
     RETURNING ",
    artifact_columns!()
);

impl Tx {
    /// SQLite: the writer's turn, then `BEGIN IMMEDIATE` (see [`SqliteWriter::begin`]).
    pub(crate) async fn begin(db: &Database) -> Result<Tx, QueueError> {
        let conn = match db {
            Database::Sqlite(db) => TxConn::Sqlite(db.writer.begin().await?),
            Database::Postgres(pool) => TxConn::Postgres(pool.begin().await?),
        };
        Ok(Tx {
            conn,
            notes: Vec::new(),
        })
    }

    pub(crate) fn notify(&mut self, job_id: &str, kind: NotificationKind) {
        self.notes.push(Notification {
            job_id: job_id.to_string(),
            kind,
        });
    }

    /// Commits, and returns the notifications for the caller to publish (see `notify.rs`
    /// for why they are not sent from inside the transaction).
    pub(crate) async fn commit(self) -> Result<Vec<Notification>, QueueError> {
        match self.conn {
            TxConn::Sqlite(t) => t.commit().await?,
            TxConn::Postgres(t) => t.commit().await?,
        }
        Ok(self.notes)
    }

    pub(crate) async fn rollback(self) -> Result<(), QueueError> {
        match self.conn {
            TxConn::Sqlite(t) => t.rollback()?,
            TxConn::Postgres(t) => t.rollback().await?,
        }
        Ok(())
    }

    /// The job, locked until commit: `FOR UPDATE` on PostgreSQL; on SQLite the IMMEDIATE
    /// transaction already excludes every other writer.
    pub(crate) async fn lock_job(&mut self, id: Uuid) -> Result<Option<Job>, QueueError> {
        let args = [Arg::Id(id)];
        let jobs = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, LOCK_JOB_SQLITE, &args, |r| job_from_row!(r))?,
            TxConn::Postgres(t) => {
                pg_rows(t, LOCK_JOB_POSTGRES, &args, |r| job_from_row!(r)).await?
            }
        };
        Ok(jobs.into_iter().next())
    }

    pub(crate) async fn insert_job(
        &mut self,
        job: &Job,
        repository: &str,
    ) -> Result<(), QueueError> {
        let mut args = vec![Arg::Id(parse_id(&job.id)?)];
        args.extend(state_args(job));
        args.extend(created_args(job, repository)?);
        self.execute(INSERT_JOB, &args).await
    }

    /// Writes back every field a transition may change.
    pub(crate) async fn save_job(&mut self, job: &Job) -> Result<(), QueueError> {
        let mut args = vec![Arg::Id(parse_id(&job.id)?)];
        args.extend(state_args(job));
        self.execute(SAVE_JOB, &args).await
    }

    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<(), QueueError> {
        match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, sql, args, |_| Ok(()))?,
            TxConn::Postgres(t) => pg_rows(t, sql, args, |_| Ok(())).await?,
        };
        Ok(())
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
    ) -> Result<JobEvent, QueueError> {
        let args = [
            Arg::Id(parse_id(job_id)?),
            Arg::text(&event.kind),
            Arg::text(event.level.as_str()),
            Arg::text(&event.message),
            Arg::json(&event.payload)?,
            Arg::at(now),
        ];
        let ids: Vec<i64> = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, INSERT_EVENT, &args, |r| r.try_get("id"))?,
            TxConn::Postgres(t) => pg_rows(t, INSERT_EVENT, &args, |r| r.try_get("id")).await?,
        };
        let event_id = ids.into_iter().next().ok_or(sqlx::Error::RowNotFound)?;
        self.notify(job_id, NotificationKind::EventAppended { event_id });
        Ok(event.stored(job_id, event_id, now))
    }

    /// Replaces the job's usage totals. The caller holds the row lock and computed `usage`
    /// from the row it locked, so no other addition can fall between its read and this
    /// write. `updated_at` stays: it marks state changes, which transitions compare.
    pub(crate) async fn set_usage(
        &mut self,
        job_id: &str,
        usage: &StepUsage,
    ) -> Result<(), QueueError> {
        let args = [Arg::Id(parse_id(job_id)?), Arg::json(usage)?];
        self.execute(SET_USAGE, &args).await
    }

    pub(crate) async fn last_event(
        &mut self,
        job_id: Uuid,
        kind: &str,
    ) -> Result<Option<JobEvent>, QueueError> {
        let args = [Arg::Id(job_id), Arg::text(kind)];
        let events = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, LAST_EVENT, &args, |r| event_from_row!(r))?,
            TxConn::Postgres(t) => pg_rows(t, LAST_EVENT, &args, |r| event_from_row!(r)).await?,
        };
        Ok(events.into_iter().next())
    }

    /// The jobs among `ids` that exist, each locked until commit (on PostgreSQL in id
    /// order, so two transactions locking overlapping sets cannot deadlock).
    pub(crate) async fn lock_jobs(&mut self, ids: &[Uuid]) -> Result<Vec<Job>, QueueError> {
        match &mut self.conn {
            TxConn::Sqlite(t) => {
                let mut jobs = Vec::with_capacity(ids.len());
                for id in ids {
                    let args = [Arg::Id(*id)];
                    jobs.extend(sqlite_rows(t, LOCK_JOB_SQLITE, &args, |r| {
                        job_from_row!(r)
                    })?);
                }
                Ok(jobs)
            }
            TxConn::Postgres(t) => {
                let rows = sqlx::query(LOCK_JOBS_POSTGRES)
                    .bind(ids)
                    .fetch_all(&mut **t)
                    .await?;
                Ok(rows
                    .iter()
                    .map(|r| job_from_row!(r))
                    .collect::<Result<_, _>>()?)
            }
        }
    }

    /// [`save_job`](Self::save_job) for several jobs; one statement on PostgreSQL.
    pub(crate) async fn save_jobs(&mut self, jobs: &[&Job]) -> Result<(), QueueError> {
        let TxConn::Postgres(t) = &mut self.conn else {
            for job in jobs {
                self.save_job(job).await?;
            }
            return Ok(());
        };
        if jobs.is_empty() {
            return Ok(());
        }
        let column = |f: fn(&Job) -> Option<String>| jobs.iter().map(|j| f(j)).collect::<Vec<_>>();
        let at =
            |f: fn(&Job) -> Option<DateTime<Utc>>| jobs.iter().map(|j| f(j)).collect::<Vec<_>>();
        let ids = jobs
            .iter()
            .map(|j| parse_id(&j.id))
            .collect::<Result<Vec<_>, _>>()?;
        sqlx::query(SAVE_JOBS_POSTGRES)
            .bind(ids)
            .bind(column(|j| Some(j.status.as_str().to_string())))
            .bind(jobs.iter().map(|j| int(j.attempt)).collect::<Vec<_>>())
            .bind(at(|j| Some(j.next_attempt_at)))
            .bind(column(|j| j.claimed_by.clone()))
            .bind(at(|j| j.lease_expires_at))
            .bind(at(|j| j.cancel_requested_at))
            .bind(column(|j| j.cancel_requested_by_user_id.clone()))
            .bind(column(|j| j.cancel_reason.clone()))
            .bind(column(|j| j.result_summary.clone()))
            .bind(column(|j| j.error_message.clone()))
            .bind(at(|j| j.started_at))
            .bind(at(|j| j.finished_at))
            .bind(at(|j| Some(j.updated_at)))
            .execute(&mut **t)
            .await?;
        Ok(())
    }

    /// [`insert_event`](Self::insert_event) for several events, appended in the order given;
    /// one statement on PostgreSQL.
    pub(crate) async fn insert_events(
        &mut self,
        events: &[(&str, &PendingEvent)],
        now: DateTime<Utc>,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let TxConn::Postgres(t) = &mut self.conn else {
            let mut appended = Vec::with_capacity(events.len());
            for (job_id, event) in events {
                appended.push(self.insert_event(job_id, event, now).await?);
            }
            return Ok(appended);
        };
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let job_ids = events
            .iter()
            .map(|(id, _)| parse_id(id))
            .collect::<Result<Vec<_>, _>>()?;
        let text =
            |f: fn(&PendingEvent) -> &str| events.iter().map(|(_, e)| f(e)).collect::<Vec<_>>();
        let payloads: Vec<Json<&Map<String, Value>>> =
            events.iter().map(|(_, e)| Json(&e.payload)).collect();
        let mut ids: Vec<i64> = sqlx::query_scalar(INSERT_EVENTS_POSTGRES)
            .bind(job_ids)
            .bind(text(|e| &e.kind))
            .bind(text(|e| e.level.as_str()))
            .bind(text(|e| &e.message))
            .bind(payloads)
            .bind(Ts(now))
            .fetch_all(&mut **t)
            .await?;
        // Rows are inserted in ordinality order, so the identity hands out ascending ids in
        // that order whatever order RETURNING lists them in.
        ids.sort_unstable();
        if ids.len() != events.len() {
            return Err(sqlx::Error::RowNotFound.into());
        }
        let appended: Vec<JobEvent> = events
            .iter()
            .zip(ids)
            .map(|((job_id, event), id)| event.stored(job_id, id, now))
            .collect();
        for event in &appended {
            self.notify(
                &event.job_id,
                NotificationKind::EventAppended { event_id: event.id },
            );
        }
        Ok(appended)
    }

    /// The names of the job's artifacts, to refuse one that runs into another's path.
    pub(crate) async fn artifact_names(&mut self, job_id: &str) -> Result<Vec<String>, QueueError> {
        let args = [Arg::Id(parse_id(job_id)?)];
        const SQL: &str = "SELECT name FROM artifacts WHERE job_id = $1";
        Ok(match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, SQL, &args, |r| r.try_get::<String, _>("name"))?,
            TxConn::Postgres(t) => {
                pg_rows(t, SQL, &args, |r| r.try_get::<String, _>("name")).await?
            }
        })
    }

    /// PostgreSQL: stores the artifact's bytes as chunks of [`ARTIFACT_CHUNK_BYTES`],
    /// replacing those of an upload it replaces, in this transaction (so a reader sees the
    /// old bytes or the new, never a mix). SQLite keeps files instead: nothing to do.
    pub(crate) async fn replace_artifact_chunks(
        &mut self,
        artifact_id: &str,
        file: &std::path::Path,
    ) -> Result<(), QueueError> {
        let TxConn::Postgres(t) = &mut self.conn else {
            return Ok(());
        };
        let id = Id(parse_id(artifact_id)?);
        sqlx::query("DELETE FROM artifact_chunks WHERE artifact_id = $1")
            .bind(id)
            .execute(&mut **t)
            .await?;
        let mut chunks = crate::artifacts::Chunks::open(file, ARTIFACT_CHUNK_BYTES).await?;
        let mut seq = 0_i32;
        while let Some(data) = chunks.next().await? {
            sqlx::query("INSERT INTO artifact_chunks (artifact_id, seq, data) VALUES ($1, $2, $3)")
                .bind(id)
                .bind(seq)
                .bind(data)
                .execute(&mut **t)
                .await?;
            seq += 1;
        }
        Ok(())
    }

    /// Inserts or, for a name the job already has, replaces (keeping the artifact's id).
    pub(crate) async fn upsert_artifact(&mut self, a: &Artifact) -> Result<Artifact, QueueError> {
        let args = [
            Arg::Id(parse_id(&a.id)?),
            Arg::Id(parse_id(&a.job_id)?),
            Arg::text(&a.name),
            Arg::BigInt(i64::try_from(a.size).map_err(decode_err)?),
            Arg::text(&a.content_type),
            Arg::text(&a.sha256),
            Arg::at(a.created_at),
        ];
        let rows = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, UPSERT_ARTIFACT, &args, |r| artifact_from_row!(r))?,
            TxConn::Postgres(t) => {
                pg_rows(t, UPSERT_ARTIFACT, &args, |r| artifact_from_row!(r)).await?
            }
        };
        Ok(rows.into_iter().next().ok_or(sqlx::Error::RowNotFound)?)
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
    pub limit: u32,
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

/// SQLite's claim: [`CLAIM_SQLITE`], then the claims' events from `machine::claimed_event`,
/// in one transaction on the writer.
async fn claim_sqlite(
    db: &SqliteDb,
    claim: &ClaimSql<'_>,
) -> Result<Vec<(Job, JobEvent)>, QueueError> {
    let t = db.writer.begin().await?;
    let mut jobs = sqlite_rows(&t, CLAIM_SQLITE, &claim_args(claim)?, |r| job_from_row!(r))?;
    if jobs.is_empty() {
        t.rollback()?;
        return Ok(Vec::new());
    }
    // RETURNING follows no order; callers get the claim order.
    jobs.sort_by(claim_order);
    let claimed: Vec<PendingEvent> = jobs.iter().map(machine::claimed_event).collect();
    let appended: Vec<(&str, &PendingEvent)> = jobs
        .iter()
        .zip(&claimed)
        .map(|(job, event)| (job.id.as_str(), event))
        .collect();
    let mut tx = Tx {
        conn: TxConn::Sqlite(t),
        notes: Vec::new(),
    };
    let events = tx.insert_events(&appended, claim.now).await?;
    tx.commit().await?;
    Ok(jobs.into_iter().zip(events).collect())
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
        let Database::Postgres(pool) = self else {
            let mut tx = Tx::begin(self).await?;
            tx.insert_job(job, repository).await?;
            let mut stored = Vec::with_capacity(events.len());
            for event in events {
                stored.push(tx.insert_event(&job.id, event, job.created_at).await?);
            }
            tx.commit().await?;
            return Ok(stored);
        };
        let mut args = vec![Arg::Id(parse_id(&job.id)?)];
        args.extend(state_args(job));
        args.extend(created_args(job, repository)?);
        let mut conn = pool.acquire().await?;
        let rows = bind_pg(sqlx::query(INSERT_JOB_WITH_EVENTS_POSTGRES), &args)
            .bind(events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>())
            .bind(events.iter().map(|e| e.level.as_str()).collect::<Vec<_>>())
            .bind(
                events
                    .iter()
                    .map(|e| e.message.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(events.iter().map(|e| Json(&e.payload)).collect::<Vec<_>>())
            .fetch_all(&mut *conn)
            .await?;
        let mut ids = rows
            .iter()
            .map(|r| r.try_get::<i64, _>("id"))
            .collect::<Result<Vec<_>, _>>()?;
        // RETURNING follows no order; the ids were drawn in the events' order.
        ids.sort_unstable();
        if ids.len() != events.len() {
            return Err(sqlx::Error::RowNotFound.into());
        }
        Ok(events
            .iter()
            .zip(ids)
            .map(|(event, id)| event.stored(&job.id, id, job.created_at))
            .collect())
    }

    /// PostgreSQL: writes `new` over the row only if the row still equals `old` in every
    /// field a transition may change, and appends `events` in the same statement. `None`
    /// when the row changed meanwhile (nothing written); otherwise the new event ids, in
    /// order. The update takes the row lock before the insert draws its ids (the insert
    /// reads the update's output), so a job's event ids still become visible in order.
    pub(crate) async fn swap_job(
        &self,
        old: &Job,
        new: &Job,
        events: &[PendingEvent],
        now: DateTime<Utc>,
    ) -> Result<Option<Vec<i64>>, QueueError> {
        let Database::Postgres(pool) = self else {
            unreachable!("swap_job is PostgreSQL's path; SQLite transitions hold the write lock")
        };
        let mut args = vec![Arg::Id(parse_id(&new.id)?)];
        args.extend(state_args(new));
        args.extend(state_args(old));
        let mut conn = pool.acquire().await?;
        let row = bind_pg(sqlx::query(SWAP_JOB_POSTGRES), &args)
            .bind(events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>())
            .bind(events.iter().map(|e| e.level.as_str()).collect::<Vec<_>>())
            .bind(
                events
                    .iter()
                    .map(|e| e.message.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(events.iter().map(|e| Json(&e.payload)).collect::<Vec<_>>())
            .bind(Ts(now))
            .fetch_one(&mut *conn)
            .await?;
        let updated: i64 = row.try_get("updated")?;
        if updated == 0 {
            return Ok(None);
        }
        Ok(Some(row.try_get("event_ids")?))
    }

    /// Leases up to `claim.limit` jobs and records each claim's `job.claimed` event,
    /// atomically; returns the jobs in claim order, each with its stored event.
    pub(crate) async fn claim_jobs(
        &self,
        claim: &ClaimSql<'_>,
    ) -> Result<Vec<(Job, JobEvent)>, QueueError> {
        let pool = match self {
            Database::Postgres(pool) => pool,
            Database::Sqlite(db) => return claim_sqlite(db, claim).await,
        };
        let lease_until = serde_json::to_value(claim.lease_until).map_err(decode_err)?;
        let mut args = claim_args(claim)?;
        args.push(Arg::text(lease_until.as_str().unwrap_or_default()));
        let mut conn = pool.acquire().await?;
        let mut rows = pg_rows(&mut conn, CLAIM_WITH_EVENTS_POSTGRES, &args, |r| {
            Ok((job_from_row!(r)?, r.try_get::<i64, _>("event_id")?))
        })
        .await?;
        rows.sort_by(|(a, _), (b, _)| claim_order(a, b));
        Ok(rows
            .into_iter()
            .map(|(job, event_id)| {
                let event = machine::claimed_event(&job).stored(&job.id, event_id, claim.now);
                (job, event)
            })
            .collect())
    }
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

    /// The newest `limit` events of the job, newest first.
    pub(crate) async fn list_newest_events(
        &self,
        job_id: Uuid,
        limit: i64,
    ) -> Result<Vec<JobEvent>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(concat!(
                "SELECT ",
                event_columns!(),
                " FROM job_events WHERE job_id = $1 ORDER BY id DESC LIMIT $2"
            ))
            .bind(Id(job_id))
            .bind(limit)
            .fetch_all(p)
            .await?;
            rows.iter().map(|row| event_from_row!(row)).collect()
        })
    }

    /// [`list_events`](Self::list_events) without the events of one kind.
    pub(crate) async fn list_events_except(
        &self,
        job_id: Uuid,
        kind: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<JobEvent>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(concat!(
                "SELECT ",
                event_columns!(),
                " FROM job_events WHERE job_id = $1 AND id > $2 AND kind <> $3 ORDER BY id LIMIT $4"
            ))
            .bind(Id(job_id))
            .bind(after)
            .bind(kind)
            .bind(limit)
            .fetch_all(p)
            .await?;
            rows.iter().map(|row| event_from_row!(row)).collect()
        })
    }

    pub(crate) async fn count_events(&self, job_id: Uuid) -> Result<i64, sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT COUNT(*) FROM job_events WHERE job_id = $1")
                .bind(Id(job_id))
                .fetch_one(p)
                .await
        })
    }

    /// For each of `job_ids` that has any, how many events of `kind` it has since its
    /// newest event of `since_kind` (or since it was created, when it has none).
    pub(crate) async fn count_kind_since(
        &self,
        job_ids: &[Uuid],
        kind: &str,
        since_kind: &str,
    ) -> Result<Vec<(Uuid, i64)>, sqlx::Error> {
        if job_ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (3..job_ids.len() + 3).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT e.job_id AS job_id, COUNT(*) AS n FROM job_events e \
             WHERE e.job_id IN ({}) AND e.kind = $1 AND e.id > COALESCE(( \
                 SELECT MAX(s.id) FROM job_events s WHERE s.job_id = e.job_id AND s.kind = $2 \
             ), 0) GROUP BY e.job_id",
            placeholders.join(", ")
        );
        on_pool!(self, p => {
            let mut query = sqlx::query(&sql).bind(kind).bind(since_kind);
            for id in job_ids {
                query = query.bind(Id(*id));
            }
            let rows = query.fetch_all(p).await?;
            rows.iter()
                .map(|row| Ok((row.try_get::<Id, _>("job_id")?.0, row.try_get::<i64, _>("n")?)))
                .collect()
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

    /// Up to `limit` stored chunks of an artifact from chunk `from` on, in order
    /// (PostgreSQL; SQLite stores none).
    pub(crate) async fn read_artifact_chunks(
        &self,
        artifact_id: Uuid,
        from: i32,
        limit: i64,
    ) -> Result<Vec<(i32, Vec<u8>)>, sqlx::Error> {
        let Database::Postgres(pool) = self else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(
            "SELECT seq, data FROM artifact_chunks WHERE artifact_id = $1 AND seq >= $2 \
             ORDER BY seq LIMIT $3",
        )
        .bind(Id(artifact_id))
        .bind(from)
        .bind(limit)
        .fetch_all(pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("seq")?, row.try_get("data")?)))
            .collect()
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
            let sql = concat!(
                "INSERT INTO api_tokens (",
                token_columns!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, NULL) RETURNING ",
                token_columns!()
            );
            let row = bind_token!(sqlx::query(sql), id, token, now).fetch_one(p).await?;
            token_from_row!(&row)
        })
    }

    /// Inserts `token` only when no live token exists, so that however many replicas start
    /// at once on an empty database, one first admin is made. SQLite runs the statement
    /// under its one writer's lock; PostgreSQL would let two such statements both see no
    /// token, so they queue on a transaction-scoped advisory lock first.
    pub(crate) async fn insert_first_token(
        &self,
        id: Uuid,
        token: &NewToken,
        now: DateTime<Utc>,
    ) -> Result<Option<TokenRecord>, sqlx::Error> {
        macro_rules! insert_if_none {
            ($executor:expr) => {
                bind_token!(sqlx::query(concat!(
                    "INSERT INTO api_tokens (",
                    token_columns!(),
                    ") SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, NULL \
                     WHERE NOT EXISTS (SELECT 1 FROM api_tokens WHERE revoked_at IS NULL) \
                     RETURNING ",
                    token_columns!()
                )), id, token, now)
                .fetch_optional($executor)
                .await?
            };
        }
        let row = match self {
            Database::Sqlite(db) => insert_if_none!(&db.pool).map(|row| token_from_row!(&row)),
            Database::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(FIRST_TOKEN_LOCK)
                    .execute(&mut *tx)
                    .await?;
                let row = insert_if_none!(&mut *tx).map(|row| token_from_row!(&row));
                tx.commit().await?;
                row
            }
        };
        row.transpose()
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

    /// Stores a session or login code, sweeping out expired ones first so the table
    /// holds only live secrets.
    pub(crate) async fn insert_session(
        &self,
        secret_hash: &str,
        token_id: Uuid,
        purpose: SessionPurpose,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query("DELETE FROM sessions WHERE expires_at <= $1")
                .bind(Ts(now))
                .execute(p)
                .await?;
            sqlx::query(
                "INSERT INTO sessions (secret_hash, token_id, purpose, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(secret_hash)
            .bind(Id(token_id))
            .bind(purpose.as_str())
            .bind(Ts(now))
            .bind(Ts(expires_at))
            .execute(p)
            .await?;
            Ok(())
        })
    }

    /// The live token behind an unexpired session.
    pub(crate) async fn find_session_token(
        &self,
        secret_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<TokenRecord>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!(
                "SELECT ",
                token_columns!(),
                " FROM api_tokens WHERE revoked_at IS NULL AND id = (SELECT token_id \
                 FROM sessions WHERE secret_hash = $1 AND purpose = 'session' \
                 AND expires_at > $2)"
            ))
            .bind(secret_hash)
            .bind(Ts(now))
            .fetch_optional(p)
            .await?;
            row.map(|row| token_from_row!(&row)).transpose()
        })
    }

    /// Deletes the row of `secret_hash` with this purpose; returns its token id while it
    /// had not yet expired. Deleting is what makes a login code single-use.
    pub(crate) async fn delete_session(
        &self,
        secret_hash: &str,
        purpose: SessionPurpose,
        now: DateTime<Utc>,
    ) -> Result<Option<Uuid>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(
                "DELETE FROM sessions WHERE secret_hash = $1 AND purpose = $2 \
                 RETURNING token_id, expires_at",
            )
            .bind(secret_hash)
            .bind(purpose.as_str())
            .fetch_optional(p)
            .await?;
            let Some(row) = row else { return Ok(None) };
            let live = row.try_get::<Ts, _>("expires_at")?.0 > now;
            Ok(live.then(|| row.try_get::<Id, _>("token_id")).transpose()?.map(|id| id.0))
        })
    }

    pub(crate) async fn find_token_by_id(
        &self,
        id: Uuid,
    ) -> Result<Option<TokenRecord>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!(
                "SELECT ",
                token_columns!(),
                " FROM api_tokens WHERE id = $1 AND revoked_at IS NULL"
            ))
            .bind(Id(id))
            .fetch_optional(p)
            .await?;
            row.map(|row| token_from_row!(&row)).transpose()
        })
    }

    /// Inserts or refreshes a worker's row; `None` capabilities or version keep what the
    /// row has.
    pub(crate) async fn upsert_worker(
        &self,
        id: &str,
        capabilities: Option<&[String]>,
        version: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        let caps: Vec<String> = capabilities.map(<[String]>::to_vec).unwrap_or_default();
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO workers (id, capabilities, version, first_seen_at, last_seen_at) \
                 VALUES ($1, $2, $3, $4, $4) ON CONFLICT (id) DO UPDATE SET \
                 capabilities = CASE WHEN $5 THEN excluded.capabilities \
                 ELSE workers.capabilities END, \
                 version = COALESCE(excluded.version, workers.version), \
                 last_seen_at = excluded.last_seen_at",
            )
            .bind(id)
            .bind(Json(&caps))
            .bind(version)
            .bind(Ts(now))
            .bind(capabilities.is_some())
            .execute(p)
            .await?;
            Ok(())
        })
    }

    pub(crate) async fn list_workers(&self) -> Result<Vec<WorkerRecord>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(
                "SELECT id, capabilities, version, first_seen_at, last_seen_at FROM workers \
                 ORDER BY last_seen_at DESC, id",
            )
            .fetch_all(p)
            .await?;
            rows.iter()
                .map(|row| {
                    Ok(WorkerRecord {
                        id: row.try_get("id")?,
                        capabilities: row.try_get::<Json<Vec<String>>, _>("capabilities")?.0,
                        version: row.try_get("version")?,
                        first_seen_at: row.try_get::<Ts, _>("first_seen_at")?.0,
                        last_seen_at: row.try_get::<Ts, _>("last_seen_at")?.0,
                        running_jobs: Vec::new(),
                    })
                })
                .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScratchPostgres;

    /// A burst of jobs into a table the planner has no statistics for yet: the claim must
    /// still walk jobs_claim_order rather than sort every queued job.
    #[tokio::test]
    async fn postgres_claim_walks_the_claim_index_before_statistics_exist() {
        let admin = std::env::var("STEPWISE_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
        let scratch = ScratchPostgres::create(&admin, "stepwise_t_plan")
            .await
            .unwrap();
        let db = Database::open_url(scratch.url()).await.unwrap();
        crate::migrate::run(&db).await.unwrap();
        let Database::Postgres(pool) = &db else {
            unreachable!("a postgres URL opens PostgreSQL")
        };
        sqlx::query(
            "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
             required_capabilities, max_attempts, next_attempt_at, created_at, updated_at) \
             SELECT gen_random_uuid(), 'task', 'queued', 0, '{}', 'o/r', '[\"codex\"]', 3, \
             now(), now() + g * interval '1 ms', now() FROM generate_series(1, 5000) AS g",
        )
        .execute(pool)
        .await
        .unwrap();
        let plan: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN {CLAIM_WITH_EVENTS_POSTGRES}"))
                .bind("w")
                .bind(Ts(Utc::now()))
                .bind(Ts(Utc::now()))
                .bind(Json(vec!["codex".to_string()]))
                .bind(None::<Vec<String>>)
                .bind(None::<Vec<String>>)
                .bind(1_i64)
                .bind("2026-01-01T00:00:00Z")
                .fetch_all(pool)
                .await
                .unwrap();
        let plan = plan.join("\n");
        assert!(plan.contains("Index Scan using jobs_claim_order"), "{plan}");
        assert!(!plan.contains("Sort"), "{plan}");
        assert!(!plan.contains("JIT"), "{plan}");
        pool.close().await;
        scratch.drop_database().await.unwrap();
    }
}
