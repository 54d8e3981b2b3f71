//! The error codes of every front door (REST, the dashboard's server functions, MCP), each
//! with the one HTTP status it answers with, so a refusal reads the same however it came;
//! and the request and response bodies of the REST API (`jobs`: the routes people use;
//! `worker`: the worker routes'; `schedules`: recurring tasks), a job as an MCP task resource (`resources`), and what
//! the health probes answer (`health`), and what a webhook is posted (`webhook`).

pub mod health;
pub mod jobs;
pub mod resources;
pub mod schedules;
pub mod webhook;
pub mod worker;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

pub use health::{Health, HealthStatus};
pub use jobs::{
    AppendStepsBody, ArtifactList, CancelBody, CheckpointList, DeliveryOutcome, EventList,
    FollowUpBody, GitHubDelivered, JobList, PauseBody, RejectBody, ResumeBody, RetryBody,
};
pub use schedules::{Overlap, Schedule, ScheduleList, ScheduleRequest};
pub use worker::{
    ClaimBody, Claimed, CompleteAndClaimBody, CompleteBody, Completed, CompletedAndClaimed,
    EventBody, FailBody, FenceBody, HeartbeatBody,
};

/// The body of every error answer, from every front door.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable, for programs: `job_not_found`, `invalid_queue_payload`, … (an [`ErrorCode`]).
    pub code: String,
    /// For people: what went wrong and what to do.
    pub message: String,
    /// For 422: every invalid field, with its path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            code: code.as_str().to_string(),
            message: message.into(),
            errors: Vec::new(),
        }
    }

    /// Every field problem of a request, as a `422 invalid_queue_payload`.
    pub fn invalid(errors: Vec<FieldError>) -> ErrorBody {
        ErrorBody {
            code: ErrorCode::InvalidQueuePayload.as_str().to_string(),
            message: invalid_fields_message(errors.len()),
            errors,
        }
    }

    /// The code, read back; an unknown one counts as an internal error.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::parse(&self.code).unwrap_or(ErrorCode::InternalError)
    }
}

impl fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for error in &self.errors {
            write!(f, "; {error}")?;
        }
        Ok(())
    }
}

/// A stable, machine-readable error code. The wire form is [`ErrorCode::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No valid user token or session.
    AuthFailed,
    /// The token is valid but may not do this (a viewer cancelling, say).
    NotAuthorized,
    /// No valid worker token.
    WorkerAuthFailed,
    /// A worker token, but not one that may do this.
    WorkerNotAuthorized,
    /// The request cannot be read (not JSON, wrong shape).
    InvalidRequest,
    /// It reads, but fields are invalid; the body lists each with its path.
    InvalidQueuePayload,
    PayloadTooLarge,
    JobNotFound,
    ArtifactNotFound,
    TokenNotFound,
    ScheduleNotFound,
    /// The caller's lease (worker id + attempt) no longer holds the job.
    JobOwnershipMismatch,
    /// The job's state forbids the operation.
    JobStateConflict,
    /// No route of the API at this path (see `GET /api/openapi.json`).
    RouteNotFound,
    /// The path is a route of the API, but not for this method.
    MethodNotAllowed,
    /// The server failed; its log has the details, the answer does not.
    InternalError,
}

crate::wire_names!(ErrorCode, "error code", exact {
    AuthFailed = "auth_failed",
    NotAuthorized = "not_authorized",
    WorkerAuthFailed = "worker_auth_failed",
    WorkerNotAuthorized = "worker_not_authorized",
    InvalidRequest = "invalid_request",
    InvalidQueuePayload = "invalid_queue_payload",
    PayloadTooLarge = "payload_too_large",
    JobNotFound = "job_not_found",
    ArtifactNotFound = "artifact_not_found",
    TokenNotFound = "token_not_found",
    ScheduleNotFound = "schedule_not_found",
    JobOwnershipMismatch = "job_ownership_mismatch",
    JobStateConflict = "job_state_conflict",
    RouteNotFound = "route_not_found",
    MethodNotAllowed = "method_not_allowed",
    InternalError = "internal_error",
});

impl ErrorCode {
    /// The HTTP status of an answer with this code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::AuthFailed | ErrorCode::WorkerAuthFailed => 401,
            ErrorCode::NotAuthorized | ErrorCode::WorkerNotAuthorized => 403,
            ErrorCode::InvalidRequest => 400,
            ErrorCode::InvalidQueuePayload => 422,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::JobNotFound
            | ErrorCode::ArtifactNotFound
            | ErrorCode::TokenNotFound
            | ErrorCode::ScheduleNotFound => 404,
            ErrorCode::RouteNotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::JobOwnershipMismatch | ErrorCode::JobStateConflict => 409,
            ErrorCode::InternalError => 500,
        }
    }

    /// Whether the answer must hide the cause (it may name paths, SQL or other internals).
    pub fn is_internal(self) -> bool {
        self.status() >= 500
    }

    pub fn parse(code: &str) -> Option<ErrorCode> {
        code.parse().ok()
    }
}

/// The message of a `422 invalid_queue_payload`; its `errors` say which fields.
pub fn invalid_fields_message(count: usize) -> String {
    match count {
        1 => "the request has 1 invalid field".to_string(),
        n => format!("the request has {n} invalid fields"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_and_only_internal_errors_are_5xx() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert_eq!(code.is_internal(), code == ErrorCode::InternalError);
        }
        assert_eq!(ErrorCode::parse("nope"), None);
    }
}
