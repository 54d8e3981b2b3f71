//! `Query` and `Path`, but a query string or path segment that does not read is refused in
//! the API's error shape, naming the problem, instead of axum's plain text; and `JobPath`,
//! where a job's id becomes a [`JobId`].

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path, Query, RawPathParams};
use axum::http::request::Parts;
use contract::JobId;
use queue::QueueError;
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

/// The `{id}` of a job's route, parsed. Text that is not a job id names no job, so it gets
/// the answer an id of no job gets (404 `job_not_found`), not a 400 about the address.
pub struct JobPath(pub JobId);

impl<S> FromRequestParts<S> for JobPath
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::internal(rejection.body_text()))?;
        let Some((_, text)) = params.iter().find(|(name, _)| *name == "id") else {
            // The route has no `{id}`: our bug, not the caller's.
            return Err(ApiError::internal("JobPath on a route without {id}"));
        };
        let id = text.parse().map_err(QueueError::from)?;
        Ok(JobPath(id))
    }
}
