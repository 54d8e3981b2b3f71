use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use contract::FieldError;
use queue::QueueError;
use serde::Serialize;

/// The one error of the HTTP API. Its body is `{code, message}` (plus `errors` listing
/// every field problem for 422); a 500 is logged in full and answered without details.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    errors: Vec<FieldError>,
}

/// The body of every error answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Stable, for programs: `job_not_found`, `invalid_queue_payload`, …
    code: &'static str,
    /// For people: what went wrong and what to do.
    message: String,
    /// For 422: every invalid field, with its path.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<FieldError>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            errors: Vec::new(),
        }
    }

    pub fn status_code(&self) -> StatusCode {
        self.status
    }

    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "auth_failed", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "not_authorized", message)
    }

    pub fn worker_auth_failed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "worker_auth_failed", message)
    }

    pub fn worker_not_authorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "worker_not_authorized", message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn invalid(errors: Vec<FieldError>) -> Self {
        let message = match errors.len() {
            1 => "the request has 1 invalid field".to_string(),
            n => format!("the request has {n} invalid fields"),
        };
        ApiError {
            errors,
            ..Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_queue_payload",
                message,
            )
        }
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> Self {
        let status = match &e {
            QueueError::NotFound { .. } => StatusCode::NOT_FOUND,
            QueueError::OwnershipMismatch { .. } | QueueError::StateConflict { .. } => {
                StatusCode::CONFLICT
            }
            QueueError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            QueueError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        match e {
            QueueError::Invalid(errors) => ApiError::invalid(errors),
            e => ApiError::new(status, e.code(), e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            // The cause stays in the log: it may hold paths, SQL or other internals.
            tracing::error!(code = self.code, error = %self.message, "request failed");
            let body = ErrorBody {
                code: self.code,
                message: "internal error; the server log has the details".into(),
                errors: Vec::new(),
            };
            return (self.status_code(), Json(body)).into_response();
        }
        let status = self.status_code();
        let body = ErrorBody {
            code: self.code,
            message: self.message,
            errors: self.errors,
        };
        (status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(e: ApiError) -> (StatusCode, serde_json::Value) {
        let response = e.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn internal_errors_hide_their_text() {
        let (status, json) = body(ApiError::internal("SELECT secret FROM vault")).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(json["code"], "internal_error");
        assert!(!json.to_string().contains("vault"));
    }

    #[tokio::test]
    async fn invalid_payload_lists_every_field_error() {
        let errors = vec![
            FieldError::new("task.instructions", "required"),
            FieldError::new("repository", "required"),
        ];
        let (status, json) = body(ApiError::from(QueueError::Invalid(errors))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(json["code"], "invalid_queue_payload");
        assert_eq!(json["errors"][1]["path"], "repository");
        assert_eq!(json["errors"].as_array().unwrap().len(), 2);
    }
}
