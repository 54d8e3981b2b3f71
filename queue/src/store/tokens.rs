//! API tokens, stored by the hash of their secret.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::types::Json;
use uuid::Uuid;

use super::{Id, Ts};
use crate::store::{Database, PgDb};
use crate::tokens::{NewToken, Role, TokenRecord};

/// The advisory lock that serializes making the first token across replicas (an arbitrary
/// constant: "stepwise" in ASCII, as one 64-bit key).
const FIRST_TOKEN_LOCK: i64 = 0x7374_6570_7769_7365;

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

impl Database {
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
            Database::Postgres(PgDb { pool, .. }) => {
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

    pub(crate) async fn count_active_tokens(&self) -> Result<i64, sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NULL")
                .fetch_one(p)
                .await
        })
    }
}
