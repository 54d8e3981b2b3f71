//! The error of every server function: the REST API's error body, so a refusal reads the
//! same from both front doors and answers with the same status (the server sets it from
//! the code, see `ssr::set_status` and the server's `server_fn_status` layer).

use std::fmt;

use contract::api::{ErrorBody, ErrorCode};
use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AppError(pub ErrorBody);

impl AppError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> AppError {
        AppError(ErrorBody::new(code, message))
    }

    pub fn code(&self) -> ErrorCode {
        self.0.error_code()
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for AppError {}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    /// What the framework itself reports: arguments that do not read are the caller's
    /// mistake (400); the rest is the server failing, or, in the browser, not reaching it.
    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        let code = match &value {
            ServerFnErrorErr::Args(_)
            | ServerFnErrorErr::MissingArg(_)
            | ServerFnErrorErr::Deserialization(_)
            | ServerFnErrorErr::UnsupportedRequestMethod(_) => ErrorCode::InvalidRequest,
            ServerFnErrorErr::Registration(_)
            | ServerFnErrorErr::Request(_)
            | ServerFnErrorErr::ServerError(_)
            | ServerFnErrorErr::MiddlewareError(_)
            | ServerFnErrorErr::Serialization(_)
            | ServerFnErrorErr::Response(_) => ErrorCode::InternalError,
        };
        AppError::new(code, value.to_string())
    }
}
