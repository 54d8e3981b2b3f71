//! The task's auth refs resolved on the worker: a payload names where a credential lives
//! (`env://NAME`, `file:///path`) and never carries it. The value goes to the CLI's
//! environment and to the [`Redactor`](crate::redact::Redactor), nowhere else.

use std::path::Path;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RefError {
    #[error("{field}: {reference:?} is not an auth ref; use env://NAME or file:///absolute/path")]
    Scheme { field: String, reference: String },
    #[error("{field}: the environment variable {name} is not set on this worker")]
    MissingEnv { field: String, name: String },
    #[error("{field}: cannot read {path}: {reason}")]
    File {
        field: String,
        path: String,
        reason: String,
    },
    #[error("{field}: {reference:?} resolves to an empty value")]
    Empty { field: String, reference: String },
}

/// Resolves `reference`, found in the payload field `field` (named in every error).
/// `env` looks variables up, so tests need not touch the process environment.
pub fn resolve(
    field: &str,
    reference: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, RefError> {
    let value = if let Some(name) = reference.strip_prefix("env://") {
        env(name).ok_or_else(|| RefError::MissingEnv {
            field: field.into(),
            name: name.into(),
        })?
    } else if let Some(path) = reference
        .strip_prefix("file://")
        .filter(|p| Path::new(p).is_absolute())
    {
        std::fs::read_to_string(path)
            .map_err(|e| RefError::File {
                field: field.into(),
                path: path.into(),
                reason: e.to_string(),
            })?
            .trim_end_matches(['\n', '\r'])
            .to_string()
    } else {
        return Err(RefError::Scheme {
            field: field.into(),
            reference: reference.into(),
        });
    };
    if value.trim().is_empty() {
        return Err(RefError::Empty {
            field: field.into(),
            reference: reference.into(),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "GH_TOKEN").then(|| "ghp_from_env".to_string())
    }

    #[test]
    fn env_and_file_refs_resolve() {
        assert_eq!(
            resolve("auth.repoAuthRef", "env://GH_TOKEN", env),
            Ok("ghp_from_env".into())
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "secret-from-file\n").unwrap();
        let reference = format!("file://{}", file.display());
        assert_eq!(
            resolve("auth.publishAuthRef", &reference, env),
            Ok("secret-from-file".into())
        );
    }

    #[test]
    fn every_failure_names_the_field_and_never_the_value() {
        let missing = resolve("auth.repoAuthRef", "env://NOPE", env).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "auth.repoAuthRef: the environment variable NOPE is not set on this worker"
        );
        let scheme = resolve("auth.repoAuthRef", "ghp_literal_secret", env).unwrap_err();
        assert!(
            scheme.to_string().starts_with("auth.repoAuthRef: "),
            "{scheme}"
        );
        let relative = resolve("auth.repoAuthRef", "file://relative/path", env).unwrap_err();
        assert!(matches!(relative, RefError::Scheme { .. }), "{relative}");
        let unreadable = resolve("auth.publishAuthRef", "file:///no/such/file", env).unwrap_err();
        assert!(
            unreadable.to_string().contains("/no/such/file"),
            "{unreadable}"
        );
        let dir = tempfile::tempdir().unwrap();
        let blank = dir.path().join("blank");
        std::fs::write(&blank, "\n").unwrap();
        let empty = resolve(
            "auth.repoAuthRef",
            &format!("file://{}", blank.display()),
            env,
        );
        assert!(matches!(empty, Err(RefError::Empty { .. })), "{empty:?}");
    }
}
