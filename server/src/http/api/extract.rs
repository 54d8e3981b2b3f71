//! `Query` and `Path`, but a query string or path segment that does not read is refused in
//! the API's error shape, naming the problem, instead of axum's plain text.

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::http::error::ApiError;

pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::bad_request(format!(
                "the query string is not valid for this route: {}",
                rejection.body_text()
            ))),
        }
    }
}

pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            // The route and its handler disagree: our bug, not the caller's.
            Err(PathRejection::MissingPathParams(e)) => Err(ApiError::internal(e.body_text())),
            Err(rejection) => Err(ApiError::bad_request(format!(
                "the address is not valid for this route: {}",
                rejection.body_text()
            ))),
        }
    }
}
