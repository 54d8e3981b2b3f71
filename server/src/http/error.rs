use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use contract::FieldError;
use contract::api::ErrorCode;
use queue::QueueError;

/// The one error of the HTTP API. Its body is `{code, message}` (plus `errors` listing
/// every field problem for 422); a 500 is logged in full and answered without details.
/// The status comes from the code ([`ErrorCode::status`]), as it does for the dashboard's
/// server functions.
#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    errors: Vec<FieldError>,
}

pub use contract::api::ErrorBody;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            errors: Vec::new(),
        }
    }

    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::AuthFailed, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotAuthorized, message)
    }

    pub fn worker_auth_failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::WorkerAuthFailed, message)
    }

    pub fn worker_not_authorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::WorkerNotAuthorized, message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn invalid(errors: Vec<FieldError>) -> Self {
        ApiError {
            message: contract::api::invalid_fields_message(errors.len()),
            errors,
            code: ErrorCode::InvalidQueuePayload,
        }
    }

    /// The same refusal, its fields named as inside the body's `prefix` object.
    pub fn within(mut self, prefix: &str) -> Self {
        for error in &mut self.errors {
            error.path = format!("{prefix}.{}", error.path);
        }
        self
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PayloadTooLarge, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Invalid(errors) => ApiError::invalid(errors),
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}

impl ApiError {
    /// The body the client gets. An internal error's cause goes to the log, not into the
    /// body: it may hold paths, SQL or other internals.
    pub fn into_body(self) -> ErrorBody {
        if self.code.is_internal() {
            tracing::error!(code = %self.code, error = %self.message, "request failed");
            return ErrorBody::new(self.code, "internal error; the server log has the details");
        }
        ErrorBody {
            code: self.code.as_str().to_string(),
            message: self.message,
            errors: self.errors,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        (status, Json(self.into_body())).into_response()
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
