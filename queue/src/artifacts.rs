//! Artifact files on disk: `{artifacts_dir}/{job_id}/{name}`. The database holds the
//! metadata; this module keeps names from escaping the job's directory and writes files so
//! that a reader never sees a half-written one.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::QueueError;

const NAME_BYTES: usize = 512;
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

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn path_of(dir: &Path, job_id: &str, name: &str) -> PathBuf {
    let mut path = dir.join(job_id);
    path.extend(name.split('/'));
    path
}

/// A file written next to its final place, waiting to be renamed over it; removed if
/// dropped before that (a refused or failed upload leaves nothing behind).
pub(crate) struct Staged {
    path: Option<PathBuf>,
}

impl Staged {
    /// Staging lives in `{dir}/.staging`, outside every job directory, so a staged file
    /// can never collide with an artifact name.
    pub(crate) async fn write(dir: &Path, bytes: &[u8]) -> Result<Staged, QueueError> {
        let staging = dir.join(".staging");
        tokio::fs::create_dir_all(&staging).await?;
        let path = staging.join(Uuid::now_v7().to_string());
        let staged = Staged {
            path: Some(path.clone()),
        };
        tokio::fs::write(&path, bytes).await?;
        Ok(staged)
    }

    /// Moves the file to `target`, replacing what was there. A name whose path runs into
    /// another artifact (`logs` when `logs/a.log` exists, or the reverse) is refused.
    pub(crate) async fn publish(mut self, target: &Path, name: &str) -> Result<(), QueueError> {
        let Some(path) = self.path.take() else {
            return Ok(());
        };
        let collision = || {
            QueueError::invalid(
                "name",
                format!("{name:?} collides with another artifact's path"),
            )
        };
        if let Some(parent) = target.parent() {
            match tokio::fs::create_dir_all(parent).await {
                Ok(()) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::NotADirectory | ErrorKind::AlreadyExists
                    ) =>
                {
                    let _ = tokio::fs::remove_file(&path).await;
                    return Err(collision());
                }
                Err(e) => {
                    let _ = tokio::fs::remove_file(&path).await;
                    return Err(e.into());
                }
            }
        }
        if tokio::fs::metadata(target).await.is_ok_and(|m| m.is_dir()) {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(collision());
        }
        if let Err(e) = tokio::fs::rename(&path, target).await {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(e.into());
        }
        Ok(())
    }
}

impl Drop for Staged {
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
        ] {
            let err = validate_name(bad).unwrap_err();
            assert_eq!(err.code(), "invalid_queue_payload", "{bad:?}");
        }
    }

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
