//! Dashboard sessions and one-time login codes, each tied to a user token by a secret's
//! hash.

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Queue;
use crate::error::{Entity, QueueError};
use crate::tokens::{self, SessionPurpose, TokenKind, TokenRecord};

impl Queue {
    /// Ties a secret (by its SHA-256) to a live user token for `ttl`: a dashboard session,
    /// or a one-time login code. Returns when it expires.
    pub async fn create_session(
        &self,
        token_id: &str,
        purpose: SessionPurpose,
        secret_hash: &str,
        ttl: Duration,
    ) -> Result<DateTime<Utc>, QueueError> {
        if !tokens::is_sha256_hex(secret_hash) {
            return Err(QueueError::invalid(
                "secretHash",
                "must be a lowercase hex SHA-256 (64 characters)",
            ));
        }
        let not_found = || QueueError::NotFound {
            entity: Entity::Token,
            id: token_id.to_string(),
        };
        let uuid = Uuid::parse_str(token_id).map_err(|_| not_found())?;
        let token = self
            .inner
            .db
            .find_token_by_id(uuid)
            .await?
            .ok_or_else(not_found)?;
        if token.kind != TokenKind::User {
            return Err(QueueError::invalid(
                "tokenId",
                "only a user token can open a dashboard session",
            ));
        }
        let now = self.now();
        let ttl =
            chrono::TimeDelta::from_std(ttl).map_err(|_| QueueError::invalid("ttl", "too long"))?;
        let expires_at = now + ttl;
        self.inner
            .db
            .insert_session(secret_hash, uuid, purpose, now, expires_at)
            .await?;
        Ok(expires_at)
    }

    /// The token behind a live session: `None` once it expired, ended, or its token was
    /// revoked.
    pub async fn find_session(&self, secret_hash: &str) -> Result<Option<TokenRecord>, QueueError> {
        Ok(self
            .inner
            .db
            .find_session_token(secret_hash, self.now())
            .await?)
    }

    /// Uses up a login code: the first call gets its token (if the code is unexpired and
    /// the token live), every later call `None`.
    pub async fn redeem_login_code(
        &self,
        secret_hash: &str,
    ) -> Result<Option<TokenRecord>, QueueError> {
        let db = &self.inner.db;
        match db
            .delete_session(secret_hash, SessionPurpose::Login, self.now())
            .await?
        {
            Some(token_id) => Ok(db.find_token_by_id(token_id).await?),
            None => Ok(None),
        }
    }

    /// Logs a session out; ending one that is gone already is not an error.
    pub async fn end_session(&self, secret_hash: &str) -> Result<(), QueueError> {
        self.inner
            .db
            .delete_session(secret_hash, SessionPurpose::Session, self.now())
            .await?;
        Ok(())
    }
}
