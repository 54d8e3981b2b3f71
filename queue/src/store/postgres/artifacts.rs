//! Artifact bytes in the database, in chunks, so that every replica can serve them.

use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use crate::QueueError;
use crate::store::{Id, parse_id};

/// The size of the pieces an artifact is stored in on PostgreSQL: big enough that a 32 MiB
/// upload is 128 rows, small enough that a reader holds little at a time.
pub(crate) const ARTIFACT_CHUNK_BYTES: usize = 256 * 1024;

/// Stores the artifact's bytes as chunks of [`ARTIFACT_CHUNK_BYTES`], replacing those of an
/// upload it replaces, in the caller's transaction (so a reader sees the old bytes or the
/// new, never a mix).
pub(crate) async fn replace_artifact_chunks(
    t: &mut PgConnection,
    artifact_id: &str,
    file: &std::path::Path,
) -> Result<(), QueueError> {
    let id = Id(parse_id(artifact_id)?);
    sqlx::query("DELETE FROM artifact_chunks WHERE artifact_id = $1")
        .bind(id)
        .execute(&mut *t)
        .await?;
    let mut chunks = crate::artifacts::Chunks::open(file, ARTIFACT_CHUNK_BYTES).await?;
    let mut seq = 0_i32;
    while let Some(data) = chunks.next().await? {
        sqlx::query("INSERT INTO artifact_chunks (artifact_id, seq, data) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(seq)
            .bind(data)
            .execute(&mut *t)
            .await?;
        seq += 1;
    }
    Ok(())
}

/// Up to `limit` stored chunks of an artifact from chunk `from` on, in order.
pub(crate) async fn read_artifact_chunks(
    pool: &PgPool,
    artifact_id: Uuid,
    from: i32,
    limit: i64,
) -> Result<Vec<(i32, Vec<u8>)>, sqlx::Error> {
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
