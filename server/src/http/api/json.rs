use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::http::error::ApiError;

/// `axum::Json`, but a body that does not parse is answered in the API's error shape,
/// naming the problem, instead of axum's plain text.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(reject(rejection)),
        }
    }
}

fn reject(rejection: JsonRejection) -> ApiError {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(rejection.body_text()),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ApiError::bad_request("send the body as JSON, with `Content-Type: application/json`")
        }
        _ => ApiError::bad_request(format!(
            "the body is not valid for this route: {}",
            rejection.body_text()
        )),
    }
}

/// Parses a body that may be empty (then `T::default()`).
pub fn optional<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid for this route: {e}")))
}
