//! Artifacts: what a name may be, uploads received aside (hashed and counted as they
//! come), and where the bytes live (`content`): files under `{artifacts_dir}/{job_id}/`
//! on SQLite (one machine), chunks in the database on PostgreSQL, so every replica serves
//! every artifact. The metadata is in the database either way.

mod content;

pub use content::ArtifactContent;
pub(crate) use content::Chunks;

use std::path::{Path, PathBuf};

use contract::JobId;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::error::QueueError;

const NAME_BYTES: usize = 512;
/// Each part of a name becomes a file or directory name, and file systems refuse longer
/// ones (ext4, xfs, btrfs, tmpfs: 255 bytes).
const NAME_PART_BYTES: usize = 255;
const CONTENT_TYPE_BYTES: usize = 255;
pub(crate) const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// Accepts relative `/`-separated paths such as `logs/steps/step-0001.log`. Refused: empty
/// or absolute names, `.`/`..` or empty components (which could climb out of the job's
/// directory or alias another name), backslashes (a separator on Windows), NUL and other
/// control characters.
pub(crate) fn validate_name(name: &str) -> Result<(), QueueError> {
    let refuse = |why: &str| Err(QueueError::invalid("name", format!("{name:?}: {why}")));
    if name.is_empty() || name.len() > NAME_BYTES {
        return refuse(&format!("must be 1 to {NAME_BYTES} bytes"));
    }
    if name.starts_with('/') {
        return refuse("must be a relative path");
    }
    if name.contains('\\') {
        return refuse("must use / as the separator, not \\");
    }
    if name.chars().any(char::is_control) {
        return refuse("must not contain NUL or control characters");
    }
    if name
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return refuse("must not contain empty, . or .. components");
    }
    if name.split('/').any(|part| part.len() > NAME_PART_BYTES) {
        return refuse(&format!(
            "each part between slashes must be at most {NAME_PART_BYTES} bytes"
        ));
    }
    Ok(())
}

pub(crate) fn content_type(given: &str) -> Result<String, QueueError> {
    let given = given.trim();
    if given.is_empty() {
        return Ok(DEFAULT_CONTENT_TYPE.to_string());
    }
    if given.len() > CONTENT_TYPE_BYTES || given.chars().any(char::is_control) {
        return Err(QueueError::invalid(
            "contentType",
            format!("must be at most {CONTENT_TYPE_BYTES} bytes without control characters"),
        ));
    }
    Ok(given.to_string())
}

#[cfg(test)]
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn path_of(dir: &Path, job_id: &JobId, name: &str) -> PathBuf {
    let mut path = dir.join(job_id.to_string());
    path.extend(name.split('/'));
    path
}

/// Whether `name` runs into `other`'s path: one is a folder of the other (`logs` and
/// `logs/a.log`). Refused on both backends, though only files on disk could not hold both,
/// so that both accept the same names.
pub(crate) fn collides(name: &str, other: &str) -> bool {
    let nested = |outer: &str, inner: &str| {
        inner.len() > outer.len()
            && inner.starts_with(outer)
            && inner.as_bytes()[outer.len()] == b'/'
    };
    nested(name, other) || nested(other, name)
}

/// An upload received in full, on this replica's disk, with its size and SHA-256 taken as
/// it came (nothing held in memory). Removed if dropped before it was stored.
#[derive(Debug)]
pub struct Incoming {
    path: Option<PathBuf>,
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

impl Incoming {
    /// The SHA-256 of the bytes received, as lowercase hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Copies `reader` into `{dir}/.staging`, outside every job's directory, refusing
    /// more than `limit` bytes as soon as they come.
    pub(crate) async fn receive(
        dir: &Path,
        mut reader: impl AsyncRead + Unpin,
        limit: u64,
    ) -> Result<Incoming, QueueError> {
        let staging = dir.join(".staging");
        tokio::fs::create_dir_all(&staging).await?;
        let path = staging.join(Uuid::now_v7().to_string());
        let mut incoming = Incoming {
            path: Some(path.clone()),
            size: 0,
            sha256: String::new(),
        };
        let mut file = tokio::fs::File::create(&path).await?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            incoming.size += n as u64;
            if incoming.size > limit {
                return Err(QueueError::TooLarge {
                    what: "artifact",
                    size: incoming.size,
                    limit,
                });
            }
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n]).await?;
        }
        file.flush().await?;
        file.sync_all().await?;
        incoming.sha256 = hex(&hasher.finalize());
        Ok(incoming)
    }

    pub(crate) fn path(&self) -> &Path {
        self.path
            .as_deref()
            .expect("an incoming file until it is stored")
    }

    /// Moves the file to `target` (on disk), replacing what was there.
    pub(crate) async fn publish(mut self, target: &Path) -> Result<(), QueueError> {
        let Some(path) = self.path.take() else {
            return Ok(());
        };
        let moved = async {
            if let Some(parent) = target.parent() {
                tokio::fs::create_dir_all(parent).await?;
            }
            tokio::fs::rename(&path, target).await
        };
        if let Err(e) = moved.await {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(e.into());
        }
        Ok(())
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            // Best effort: a leftover staging file wastes space but harms nothing.
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_names_stay_inside_the_job_directory() {
        for ok in [
            "logs/steps/step-0001.log",
            "task_context.json",
            "a..b/c.d",
            ".hidden",
        ] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "logs/../../x",
            "logs/./x",
            "logs//x",
            "logs/",
            "a\\b",
            "a\0b",
            "..",
            &"x".repeat(256),
            &format!("logs/{}.log", "y".repeat(252)),
        ] {
            let err = validate_name(bad).unwrap_err();
            assert_eq!(err.code().as_str(), "invalid_queue_payload", "{bad:?}");
        }
    }

    #[test]
    fn a_name_collides_with_its_folders_and_their_files() {
        assert!(collides("logs", "logs/a.log"));
        assert!(collides("logs/a.log/b", "logs/a.log"));
        assert!(!collides("logs/a.log", "logs/a.log"));
        assert!(!collides("logs", "logs.txt"));
        assert!(!collides("log", "logs/a"));
    }

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
