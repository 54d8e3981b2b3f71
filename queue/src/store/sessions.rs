//! Dashboard sessions and one-time login codes.

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::{Id, Ts};
use crate::store::Database;
use crate::tokens::{SessionPurpose, TokenRecord};

impl Database {
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
}
