//! The one error of the queue service; each variant is one error code of the API.

use contract::api::ErrorCode;
use contract::{FieldError, JobId, JobState, ParseJobIdError, limits};

/// What a [`QueueError::NotFound`] was looking for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    Job,
    Artifact,
    Token,
    Schedule,
}

contract::wire_names!(Entity, "entity", exact {
    Job = "job",
    Artifact = "artifact",
    Token = "token",
    Schedule = "schedule",
});

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("{} {id} not found", entity.as_str())]
    NotFound { entity: Entity, id: String },
    /// The caller's fence (worker id + attempt) does not hold the job's lease: the lease
    /// expired and was taken back, or another worker holds it.
    #[error("job {job_id} is not leased to this worker and attempt: {message}")]
    OwnershipMismatch { job_id: JobId, message: String },
    /// The job's state does not allow the operation; `current` says which state it is in.
    #[error("job {job_id} is {current}: {message}")]
    StateConflict {
        job_id: JobId,
        current: JobState,
        message: String,
    },
    /// The caller is who they say, but their role may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error("invalid request: {}", join(.0))]
    Invalid(Vec<FieldError>),
    #[error("{what} is {size} bytes; the limit is {limit}")]
    TooLarge {
        what: &'static str,
        size: u64,
        limit: u64,
    },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("artifact storage error: {0}")]
    Storage(#[from] std::io::Error),
}

fn join(errors: &[FieldError]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

impl QueueError {
    /// The API's error code for this error, which also gives its HTTP status.
    pub fn code(&self) -> ErrorCode {
        match self {
            QueueError::NotFound { entity, .. } => match entity {
                Entity::Job => ErrorCode::JobNotFound,
                Entity::Artifact => ErrorCode::ArtifactNotFound,
                Entity::Token => ErrorCode::TokenNotFound,
                Entity::Schedule => ErrorCode::ScheduleNotFound,
            },
            QueueError::OwnershipMismatch { .. } => ErrorCode::JobOwnershipMismatch,
            QueueError::StateConflict { .. } => ErrorCode::JobStateConflict,
            QueueError::Forbidden(_) => ErrorCode::NotAuthorized,
            QueueError::Invalid(_) => ErrorCode::InvalidQueuePayload,
            QueueError::TooLarge { .. } => ErrorCode::PayloadTooLarge,
            QueueError::Database(_)
            | QueueError::Sqlite(_)
            | QueueError::Migrate(_)
            | QueueError::Storage(_) => ErrorCode::InternalError,
        }
    }

    pub(crate) fn job_not_found(id: &JobId) -> Self {
        QueueError::NotFound {
            entity: Entity::Job,
            id: id.to_string(),
        }
    }

    pub(crate) fn invalid(path: &str, message: impl Into<String>) -> Self {
        QueueError::Invalid(vec![FieldError::new(path, message)])
    }

    pub(crate) fn conflict(job_id: &JobId, current: JobState, message: impl Into<String>) -> Self {
        QueueError::StateConflict {
            job_id: *job_id,
            current,
            message: message.into(),
        }
    }

    pub(crate) fn not_owner(job_id: &JobId, message: impl Into<String>) -> Self {
        QueueError::OwnershipMismatch {
            job_id: *job_id,
            message: message.into(),
        }
    }
}

/// Text that is not a job id names no job: its answer is the one an id no job has, so a
/// caller cannot tell a malformed id from a deleted job's, and needs no second case.
impl From<ParseJobIdError> for QueueError {
    fn from(error: ParseJobIdError) -> Self {
        QueueError::NotFound {
            entity: Entity::Job,
            id: error.text().to_string(),
        }
    }
}

/// Typed text with a NUL is refused (see [`contract::text`]).
pub(crate) fn refuse_nul(path: &str, text: &str) -> Result<(), QueueError> {
    contract::text::refuse_nul(path, text).map_err(|e| QueueError::Invalid(vec![e]))
}

/// An operator's `reason` (for a cancel, a rejection): no NUL, at most
/// [`limits::CANCEL_REASON_CHARS`] characters.
pub(crate) fn check_reason(reason: Option<&str>) -> Result<(), QueueError> {
    let Some(reason) = reason else {
        return Ok(());
    };
    refuse_nul("reason", reason)?;
    if reason.chars().count() > limits::CANCEL_REASON_CHARS {
        return Err(QueueError::invalid(
            "reason",
            format!("at most {} characters", limits::CANCEL_REASON_CHARS),
        ));
    }
    Ok(())
}

/// Text a worker reports (an error message, a summary): NULs replaced, size bounded.
pub(crate) fn reported(what: &'static str, text: String) -> Result<String, QueueError> {
    if text.len() > limits::REPORTED_TEXT_BYTES {
        return Err(QueueError::TooLarge {
            what,
            size: text.len() as u64,
            limit: limits::REPORTED_TEXT_BYTES as u64,
        });
    }
    Ok(contract::text::replace_nul(&text).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_conflict_names_the_current_state_and_its_code() {
        let id: JobId = "0190a000-0000-7000-8000-000000000001".parse().unwrap();
        let err = QueueError::conflict(&id, JobState::Succeeded, "cannot cancel a finished job");
        assert_eq!(err.code(), ErrorCode::JobStateConflict);
        assert_eq!(
            err.to_string(),
            "job 0190a000-0000-7000-8000-000000000001 is succeeded: cannot cancel a finished job"
        );
    }

    #[test]
    fn text_that_is_not_a_job_id_is_a_job_not_found() {
        let err = QueueError::from("<b>nope</b>".parse::<JobId>().unwrap_err());
        assert_eq!(err.code(), ErrorCode::JobNotFound);
        assert_eq!(err.to_string(), "job <b>nope</b> not found");
    }

    #[test]
    fn invalid_lists_every_field_error() {
        let err = QueueError::Invalid(vec![
            FieldError::new("priority", "too high"),
            FieldError::new("", "bad"),
        ]);
        assert_eq!(err.code(), ErrorCode::InvalidQueuePayload);
        assert_eq!(err.to_string(), "invalid request: priority: too high; bad");
    }
}
