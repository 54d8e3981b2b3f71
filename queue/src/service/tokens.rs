//! API tokens: stored by hash, listed, revoked, and the first admin of a fresh install.

use uuid::Uuid;

use super::Queue;
use crate::error::{Entity, QueueError};
use crate::tokens::{NewToken, TokenRecord};

impl Queue {
    pub async fn create_token(&self, token: NewToken) -> Result<TokenRecord, QueueError> {
        token.validate().map_err(QueueError::Invalid)?;
        match self
            .inner
            .db
            .insert_token(Uuid::now_v7(), &token, self.now())
            .await
        {
            Ok(record) => Ok(record),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(QueueError::invalid(
                "tokenHash",
                "another token already has this hash",
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Stores `token` only if no live token exists yet (a fresh installation's first
    /// admin), atomically across replicas: `None` when another got there first.
    pub async fn create_first_token(
        &self,
        token: NewToken,
    ) -> Result<Option<TokenRecord>, QueueError> {
        token.validate().map_err(QueueError::Invalid)?;
        Ok(self
            .inner
            .db
            .insert_first_token(Uuid::now_v7(), &token, self.now())
            .await?)
    }

    /// The non-revoked token with this hash (lowercase hex SHA-256 of the secret).
    pub async fn find_token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>, QueueError> {
        Ok(self.inner.db.find_token_by_hash(hash).await?)
    }

    /// Every token, revoked ones included, newest first.
    pub async fn list_tokens(&self) -> Result<Vec<TokenRecord>, QueueError> {
        Ok(self.inner.db.list_tokens().await?)
    }

    /// Revokes the token; revoking again keeps the first revocation time.
    pub async fn revoke_token(&self, id: &str) -> Result<TokenRecord, QueueError> {
        let not_found = || QueueError::NotFound {
            entity: Entity::Token,
            id: id.to_string(),
        };
        let uuid = Uuid::parse_str(id).map_err(|_| not_found())?;
        self.inner
            .db
            .revoke_token(uuid, self.now())
            .await?
            .ok_or_else(not_found)
    }

    /// Records that the token was just used.
    pub async fn touch_token(&self, id: &str) -> Result<(), QueueError> {
        let not_found = || QueueError::NotFound {
            entity: Entity::Token,
            id: id.to_string(),
        };
        let uuid = Uuid::parse_str(id).map_err(|_| not_found())?;
        if self.inner.db.touch_token(uuid, self.now()).await? {
            Ok(())
        } else {
            Err(not_found())
        }
    }

    /// How many tokens are not revoked: zero tells the server to bootstrap an admin token.
    pub async fn count_tokens(&self) -> Result<u64, QueueError> {
        let n = self.inner.db.count_active_tokens().await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
