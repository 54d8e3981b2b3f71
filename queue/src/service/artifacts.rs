//! A job's artifacts: received aside, stored under the worker's fence, read back as a
//! file (SQLite) or chunks in the database (PostgreSQL).

use contract::job::{PublishResult, task};
use contract::{Artifact, JobId};
use uuid::Uuid;

use super::Queue;
use crate::artifacts::{self, ArtifactContent, Incoming};
use crate::error::{Entity, QueueError};
use crate::lease::Fence;
use crate::store::Database;

/// The most of `publish_result.json` read: it is a few hundred bytes.
const PUBLISH_RESULT_BYTES: u64 = 64 * 1024;

impl Queue {
    /// Receives an upload aside, on this replica's disk, hashing and counting it as it
    /// comes and refusing it past the artifact limit; [`store_artifact`](Self::store_artifact)
    /// then stores it under a job.
    pub async fn receive_artifact(
        &self,
        reader: impl tokio::io::AsyncRead + Unpin,
    ) -> Result<Incoming, QueueError> {
        let config = &self.inner.config;
        Incoming::receive(&config.artifacts_dir, reader, config.max_artifact_bytes).await
    }

    /// Stores `bytes` as the job's artifact `name` ([`receive_artifact`](Self::receive_artifact)
    /// then [`store_artifact`](Self::store_artifact)).
    pub async fn add_artifact(
        &self,
        id: &JobId,
        fence: &Fence,
        name: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<Artifact, QueueError> {
        artifacts::validate_name(name)?;
        let incoming = self.receive_artifact(bytes).await?;
        self.store_artifact(id, fence, name, content_type, incoming)
            .await
    }

    /// Stores a received upload as the job's artifact `name`, replacing an earlier one of
    /// that name, while the job row is locked and the worker's fence checked, so a stale
    /// worker can neither add nor overwrite one. On SQLite the file moves under the
    /// artifacts directory; on PostgreSQL its bytes go into the database in the same
    /// transaction as the metadata, so every replica can serve it.
    pub async fn store_artifact(
        &self,
        id: &JobId,
        fence: &Fence,
        name: &str,
        content_type: &str,
        incoming: Incoming,
    ) -> Result<Artifact, QueueError> {
        artifacts::validate_name(name)?;
        let content_type = artifacts::content_type(content_type)?;
        let now = self.now();
        let (mut tx, job) = self.lock_fenced(id, fence).await?;
        let names = tx.artifact_names(&job.id).await?;
        if names.iter().any(|other| artifacts::collides(name, other)) {
            return Err(QueueError::invalid(
                "name",
                format!("{name:?} collides with another artifact's path"),
            ));
        }
        let artifact = tx
            .upsert_artifact(&Artifact {
                id: Uuid::now_v7().to_string(),
                job_id: job.id,
                name: name.to_string(),
                size: incoming.size,
                content_type,
                sha256: incoming.sha256.clone(),
                created_at: now,
            })
            .await?;
        tx.replace_artifact_chunks(&artifact.id, incoming.path())
            .await?;
        if matches!(self.inner.db, Database::Sqlite(_)) {
            // Moved before the commit: if the commit then failed, the file would be newer
            // than its metadata, which a re-upload repairs; the other order could leave
            // metadata pointing at a file that never arrived.
            let dir = &self.inner.config.artifacts_dir;
            incoming
                .publish(&artifacts::path_of(dir, &job.id, name))
                .await?;
        }
        self.commit(tx).await?;
        Ok(artifact)
    }

    /// The job's artifacts, by name.
    pub async fn list_artifacts(&self, id: &JobId) -> Result<Vec<Artifact>, QueueError> {
        if self.inner.db.get_job(id.uuid()).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        Ok(self.inner.db.list_artifacts(id.uuid()).await?)
    }

    /// An artifact's metadata and where to read its bytes, for the caller to stream.
    pub async fn open_artifact(
        &self,
        id: &JobId,
        name: &str,
    ) -> Result<(Artifact, ArtifactContent), QueueError> {
        let not_found = || QueueError::NotFound {
            entity: Entity::Artifact,
            id: format!("{id}/{name}"),
        };
        if artifacts::validate_name(name).is_err() {
            return Err(not_found());
        }
        let artifact = self
            .inner
            .db
            .get_artifact(id.uuid(), name)
            .await?
            .ok_or_else(not_found)?;
        let content = self.content_of(&artifact)?;
        Ok((artifact, content))
    }

    /// An artifact found by its id, and where to read its bytes.
    pub async fn artifact_by_id(
        &self,
        id: &JobId,
        artifact_id: &str,
    ) -> Result<(Artifact, ArtifactContent), QueueError> {
        let artifact = self
            .list_artifacts(id)
            .await?
            .into_iter()
            .find(|a| a.id == artifact_id)
            .ok_or_else(|| QueueError::NotFound {
                entity: Entity::Artifact,
                id: format!("{id}/{artifact_id}"),
            })?;
        let content = self.content_of(&artifact)?;
        Ok((artifact, content))
    }

    fn content_of(&self, artifact: &Artifact) -> Result<ArtifactContent, QueueError> {
        Ok(match &self.inner.db {
            Database::Sqlite(_) => ArtifactContent::File(artifacts::path_of(
                &self.inner.config.artifacts_dir,
                &artifact.job_id,
                &artifact.name,
            )),
            db @ Database::Postgres(_) => ArtifactContent::Chunks {
                db: db.clone(),
                artifact_id: Uuid::parse_str(&artifact.id)
                    .map_err(|_| QueueError::invalid("artifactId", "not an artifact id"))?,
            },
        })
    }

    /// An artifact found by its id, with the first `max_bytes` of its content and whether
    /// there was more: for a page that shows a log or a patch.
    pub async fn read_artifact(
        &self,
        id: &JobId,
        artifact_id: &str,
        max_bytes: u64,
    ) -> Result<(Artifact, Vec<u8>, bool), QueueError> {
        let (artifact, content) = self.artifact_by_id(id, artifact_id).await?;
        let (bytes, more) = content.read_start(max_bytes).await?;
        Ok((artifact, bytes, more))
    }

    /// What the job's last publish did (`publish_result.json`), when it says so.
    pub async fn publish_result(&self, id: &JobId) -> Option<PublishResult> {
        let (_, content) = self.open_artifact(id, task::PUBLISH_RESULT).await.ok()?;
        let (bytes, _) = content.read_start(PUBLISH_RESULT_BYTES).await.ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}
