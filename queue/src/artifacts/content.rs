//! Reading an artifact's bytes, from wherever its backend keeps them, a piece at a time:
//! a download streams them, a page reads their start. Never a whole file in memory.

use std::path::PathBuf;

use futures_util::stream::{self, BoxStream, StreamExt};
use tokio::io::AsyncReadExt;
use uuid::Uuid;

use crate::error::QueueError;
use crate::store::Database;

/// How many stored chunks one read fetches.
const CHUNKS_PER_READ: i64 = 4;

/// Where an artifact's bytes are.
#[derive(Debug, Clone)]
pub enum ArtifactContent {
    /// A file under the artifacts directory of this machine (SQLite).
    File(PathBuf),
    /// Chunks in the database, in order (PostgreSQL): any replica can read them.
    Chunks { db: Database, artifact_id: Uuid },
}

impl ArtifactContent {
    /// The bytes, in pieces as they are read.
    pub fn into_stream(self) -> BoxStream<'static, std::io::Result<Vec<u8>>> {
        match self {
            ArtifactContent::File(path) => {
                stream::once(
                    async move { tokio::fs::File::open(&path).await.map_err(|e| at(&path, e)) },
                )
                .map(|opened| match opened {
                    Ok(file) => tokio_util::io::ReaderStream::new(file)
                        .map(|piece| piece.map(|bytes| bytes.to_vec()))
                        .boxed(),
                    Err(e) => stream::once(async move { Err(e) }).boxed(),
                })
                .flatten()
                .boxed()
            }
            ArtifactContent::Chunks { db, artifact_id } => {
                stream::unfold(Some(0_i32), move |next| {
                    let db = db.clone();
                    async move {
                        let from = next?;
                        match db
                            .read_artifact_chunks(artifact_id, from, CHUNKS_PER_READ)
                            .await
                        {
                            Ok(chunks) if chunks.is_empty() => None,
                            Ok(chunks) => {
                                let more = chunks.len() as i64 == CHUNKS_PER_READ;
                                let last = chunks.last().map_or(from, |(seq, _)| *seq);
                                let bytes: Vec<u8> =
                                    chunks.into_iter().flat_map(|(_, data)| data).collect();
                                Some((Ok(bytes), more.then_some(last + 1)))
                            }
                            Err(e) => Some((Err(std::io::Error::other(e)), None)),
                        }
                    }
                })
                .boxed()
            }
        }
    }

    /// The first `max` bytes, and whether there was more.
    pub async fn read_start(self, max: u64) -> Result<(Vec<u8>, bool), QueueError> {
        let mut bytes = Vec::new();
        let mut pieces = self.into_stream();
        while let Some(piece) = pieces.next().await {
            bytes.extend_from_slice(&piece?);
            if bytes.len() as u64 > max {
                bytes.truncate(max as usize);
                return Ok((bytes, true));
            }
        }
        Ok((bytes, false))
    }
}

fn at(path: &std::path::Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// A staged file read in the store's chunk size, for writing it into the database.
pub(crate) struct Chunks {
    file: tokio::fs::File,
    size: usize,
}

impl Chunks {
    pub(crate) async fn open(path: &std::path::Path, size: usize) -> Result<Chunks, QueueError> {
        let file = tokio::fs::File::open(path).await.map_err(|e| at(path, e))?;
        Ok(Chunks { file, size })
    }

    /// The next chunk; `None` at the end.
    pub(crate) async fn next(&mut self) -> Result<Option<Vec<u8>>, QueueError> {
        let mut chunk = Vec::with_capacity(self.size);
        (&mut self.file)
            .take(self.size as u64)
            .read_to_end(&mut chunk)
            .await?;
        Ok((!chunk.is_empty()).then_some(chunk))
    }
}
