//! The SQL of the queue, and the only place that has any: one file per concern (jobs,
//! claims, events, artifacts, retention, tokens, sessions, workers) holding the statements both
//! backends share, written once with `$N` placeholders that every driver binds by number.
//! Where a backend does a thing its own way, the concern's file hands over to its driver:
//! [`postgres`] (one statement where the shared SQL takes several; artifact bytes in the
//! database) or [`sqlite`] (the one write connection with group commit, its checkpointer,
//! the claim). Reads go through the sqlx pools ([`on_pool!`] expands the same code for
//! each) and on SQLite in WAL mode never wait for the writer; writes go through [`Tx`].

mod types;

use chrono::{DateTime, Utc};
use contract::{Job, JobId};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Transaction};
use uuid::Uuid;

use crate::QueueError;
use crate::notify::{Notification, NotificationKind};
use sqlite::SqliteTx;
pub(crate) use types::{Id, Ts, ts};

/// Runs `$body` with `$p` bound to the pool, whichever the backend.
macro_rules! on_pool {
    ($db:expr, $p:ident => $body:expr) => {
        match $db {
            Database::Sqlite(db) => {
                let $p = &db.pool;
                $body
            }
            Database::Postgres($crate::store::PgDb { pool: $p, .. }) => $body,
        }
    };
}

#[macro_use]
mod columns;

// Decoders are macros rather than generic functions: expanded where the row type is
// concrete (an sqlx row, or a rusqlite row through `sqlite::RowExt`), they spare a page of
// trait bounds per decoder.
macro_rules! job_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<::contract::Job, sqlx::Error> {
            Ok(::contract::Job {
                id: row.try_get::<$crate::store::Id, _>("id")?.0.into(),
                job_type: row.try_get("job_type")?,
                status: row
                    .try_get::<String, _>("status")?
                    .parse::<::contract::JobState>()
                    .map_err($crate::store::decode_err)?,
                priority: row.try_get("priority")?,
                payload: ::std::sync::Arc::new(
                    row.try_get::<::sqlx::types::Json<::serde_json::Value>, _>("payload")?
                        .0,
                ),
                affinity_key: row.try_get("affinity_key")?,
                required_capabilities: row
                    .try_get::<::sqlx::types::Json<Vec<String>>, _>("required_capabilities")?
                    .0,
                created_by_user_id: row.try_get("created_by_user_id")?,
                attempt: $crate::store::count(row.try_get("attempt")?)?,
                max_attempts: $crate::store::count(row.try_get("max_attempts")?)?,
                next_attempt_at: row.try_get::<$crate::store::Ts, _>("next_attempt_at")?.0,
                claimed_by: row.try_get("claimed_by")?,
                lease_expires_at: row
                    .try_get::<Option<$crate::store::Ts>, _>("lease_expires_at")?
                    .map(|t| t.0),
                cancel_requested_at: row
                    .try_get::<Option<$crate::store::Ts>, _>("cancel_requested_at")?
                    .map(|t| t.0),
                cancel_requested_by_user_id: row.try_get("cancel_requested_by_user_id")?,
                cancel_reason: row.try_get("cancel_reason")?,
                result_summary: row.try_get("result_summary")?,
                error_message: row.try_get("error_message")?,
                started_at: row
                    .try_get::<Option<$crate::store::Ts>, _>("started_at")?
                    .map(|t| t.0),
                finished_at: row
                    .try_get::<Option<$crate::store::Ts>, _>("finished_at")?
                    .map(|t| t.0),
                created_at: row.try_get::<$crate::store::Ts, _>("created_at")?.0,
                updated_at: row.try_get::<$crate::store::Ts, _>("updated_at")?.0,
                usage: row
                    .try_get::<Option<::sqlx::types::Json<::contract::StepUsage>>, _>("usage")?
                    .map(|j| j.0),
                pause_requested: row
                    .try_get::<Option<::sqlx::types::Json<::contract::events::PauseRequest>>, _>(
                        "pause_requested",
                    )?
                    .map(|j| j.0),
                resume_from: row
                    .try_get::<Option<::sqlx::types::Json<::contract::events::CheckpointSaved>>, _>(
                        "resume_from",
                    )?
                    .map(|j| j.0),
                approval: row
                    .try_get::<Option<::sqlx::types::Json<::contract::Approval>>, _>("approval")?
                    .map(|j| j.0),
                pause_reason: None,
                round: 1,
                // Not a column: the edges' (see `Queue::get_job`).
                waiting_for: Vec::new(),
            }
            .with_derived())
        })()
    }};
}

macro_rules! kept_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<$crate::store::Kept, sqlx::Error> {
            let claimed = match row.try_get::<Option<i64>, _>("claimed_event_id")? {
                Some(id) => Some($crate::store::KeptClaim {
                    id,
                    at: row.try_get::<$crate::store::Ts, _>("claimed_at")?.0,
                    lease_until: row
                        .try_get::<Option<$crate::store::Ts>, _>("claim_lease_until")?
                        .map(|at| at.0),
                }),
                None => None,
            };
            Ok($crate::store::Kept {
                claimed,
                completed: row.try_get("completed_event_id")?,
            })
        })()
    }};
}

macro_rules! event_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<::contract::JobEvent, sqlx::Error> {
            Ok(::contract::JobEvent {
                id: row.try_get("id")?,
                job_id: row.try_get::<$crate::store::Id, _>("job_id")?.0.into(),
                kind: row.try_get("kind")?,
                level: row
                    .try_get::<String, _>("level")?
                    .parse::<::contract::EventLevel>()
                    .map_err($crate::store::decode_err)?,
                message: row.try_get("message")?,
                payload: row.try_get::<::sqlx::types::Json<::serde_json::Map<String, ::serde_json::Value>>, _>("payload")?.0,
                created_at: row.try_get::<$crate::store::Ts, _>("created_at")?.0,
            })
        })()
    }};
}

macro_rules! artifact_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<::contract::Artifact, sqlx::Error> {
            Ok(::contract::Artifact {
                id: row.try_get::<$crate::store::Id, _>("id")?.0.to_string(),
                job_id: row.try_get::<$crate::store::Id, _>("job_id")?.0.into(),
                name: row.try_get("name")?,
                size: u64::try_from(row.try_get::<i64, _>("size")?)
                    .map_err($crate::store::decode_err)?,
                content_type: row.try_get("content_type")?,
                sha256: row.try_get("sha256")?,
                created_at: row.try_get::<$crate::store::Ts, _>("created_at")?.0,
            })
        })()
    }};
}

macro_rules! token_from_row {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<$crate::tokens::TokenRecord, sqlx::Error> {
            let list = |name: &str| -> Result<Option<Vec<String>>, sqlx::Error> {
                Ok(row
                    .try_get::<Option<::sqlx::types::Json<Vec<String>>>, _>(name)?
                    .map(|j| j.0))
            };
            Ok($crate::tokens::TokenRecord {
                id: row.try_get::<$crate::store::Id, _>("id")?.0.to_string(),
                name: row.try_get("name")?,
                kind: row
                    .try_get::<String, _>("kind")?
                    .parse::<$crate::tokens::TokenKind>()
                    .map_err($crate::store::decode_err)?,
                role: row
                    .try_get::<Option<String>, _>("role")?
                    .map(|r| r.parse::<$crate::tokens::Role>())
                    .transpose()
                    .map_err($crate::store::decode_err)?,
                token_hash: row.try_get("token_hash")?,
                token_prefix: row.try_get("token_prefix")?,
                capabilities: list("capabilities")?,
                allowed_repositories: list("allowed_repositories")?,
                allowed_job_types: list("allowed_job_types")?,
                created_at: row.try_get::<$crate::store::Ts, _>("created_at")?.0,
                last_used_at: row
                    .try_get::<Option<$crate::store::Ts>, _>("last_used_at")?
                    .map(|t| t.0),
                revoked_at: row
                    .try_get::<Option<$crate::store::Ts>, _>("revoked_at")?
                    .map(|t| t.0),
            })
        })()
    }};
}

// Declared after the macros, which a module sees only once they are defined. The
// concerns first, then the two drivers.
mod artifacts;
mod claim_sql;
mod claims;
mod database;
mod dependencies;
mod events;
mod jobs;
mod kept;
mod leases;
mod live;
mod outbox;
mod replies;
mod retention;
mod schedules;
#[cfg(feature = "seed")]
mod seed;
mod sessions;
mod sourced;
mod tokens;
mod walks;
mod watches;
mod workers;

mod postgres;
mod sqlite;

pub(crate) use claim_sql::ClaimSql;
pub use database::{Database, DatabaseError, PgDb, SQLITE_FILE, SqliteDb};
pub(crate) use events::{EventOrder, EventPage};
pub(crate) use jobs::ListSql;
pub(crate) use kept::{Kept, KeptClaim, folds, swappable};
pub(crate) use postgres::{LiveDead, Swap, Swapped};
pub(crate) use schedules::{Leased, Passed};
pub(crate) use walks::{Chore, Look, PassedOver, Seen};

fn decode_err(error: impl std::error::Error + Send + Sync + 'static) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

fn count(n: i32) -> Result<u32, sqlx::Error> {
    u32::try_from(n).map_err(decode_err)
}

fn int(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
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
    /// [`Arg::Json`] or SQL `NULL`.
    JsonOpt(Option<Value>),
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

    fn json_opt(value: Option<&impl serde::Serialize>) -> Result<Self, sqlx::Error> {
        value
            .map(serde_json::to_value)
            .transpose()
            .map(Arg::JsonOpt)
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
            Arg::JsonOpt(value) => query.bind(value.as_ref().map(Json)),
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

fn parse_id(id: &str) -> Result<Uuid, sqlx::Error> {
    Uuid::parse_str(id).map_err(decode_err)
}

enum TxConn {
    Sqlite(SqliteTx),
    Postgres(Transaction<'static, Postgres>),
}

/// One write transaction, collecting the notifications to send when it commits.
pub(crate) struct Tx {
    conn: TxConn,
    notes: Vec<Notification>,
    /// The jobs it locked whose row keeps events, as locked: a save that would change
    /// them writes them out first (`kept.rs`).
    kept: Vec<(Job, Kept)>,
    /// The jobs it locked that had finished: a save that queues one again tells
    /// retention to look at it again (`walks.rs`).
    finished: Vec<Uuid>,
}

impl Tx {
    /// SQLite: the writer's turn, then `BEGIN IMMEDIATE` (see [`SqliteWriter::begin`]).
    pub(crate) async fn begin(db: &Database) -> Result<Tx, QueueError> {
        let conn = match db {
            Database::Sqlite(db) => TxConn::Sqlite(db.writer.begin().await?),
            Database::Postgres(PgDb { pool, .. }) => TxConn::Postgres(pool.begin().await?),
        };
        Ok(Tx {
            conn,
            notes: Vec::new(),
            kept: Vec::new(),
            finished: Vec::new(),
        })
    }

    pub(crate) fn notify(&mut self, job_id: &JobId, kind: NotificationKind) {
        self.notes.push(Notification {
            job_id: *job_id,
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

    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<(), QueueError> {
        match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, sql, args, |_| Ok(()))?,
            TxConn::Postgres(t) => pg_rows(t, sql, args, |_| Ok(())).await?,
        };
        Ok(())
    }
}
