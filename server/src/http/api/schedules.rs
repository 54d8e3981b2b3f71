//! Recurring tasks: make, list, read, pause, resume and delete schedules. Each slot of a
//! schedule queues its job request once, however many replicas run (see `queue::Scheduler`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use contract::api::{ErrorBody, Schedule, ScheduleList, ScheduleRequest};

use super::extract::ApiPath;
use super::json::ApiJson;
use crate::http::auth::User;
use crate::http::error::ApiError;
use crate::http::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/schedules", post(create).get(list))
        .route("/schedules/{id}", get(show).delete(remove))
        .route("/schedules/{id}/pause", post(pause))
        .route("/schedules/{id}/resume", post(resume))
}

#[utoipa::path(post, path = "/api/queue/schedules", tag = "schedules",
    request_body(content = ScheduleRequest, description = "`cron` has five fields (or `@daily`, `@weekly`…) and is read in `timezone` (IANA, default UTC); `task` is a job request as POST /api/queue/jobs takes it; `overlap` is `skip` (default: no job while the previous one is queued or running) or `queue`; with `catchUp`, the latest slot missed while no server ran is run (only that one)."),
    responses((status = 201, description = "made; its first slot is the next after now", body = Schedule),
        (status = 422, description = "every invalid field (`cron`, `timezone`, `task.…`, a `name` taken)", body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    user: User,
    ApiJson(raw): ApiJson<serde_json::Value>,
) -> Result<(StatusCode, Json<Schedule>), ApiError> {
    user.require_operator()?;
    let made = state
        .queue
        .create_schedule(&raw, Some(user.user_id()))
        .await?;
    Ok((StatusCode::CREATED, Json(made)))
}

#[utoipa::path(get, path = "/api/queue/schedules", tag = "schedules",
    responses((status = 200, description = "every schedule, by name", body = ScheduleList), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn list(State(state): State<AppState>, _user: User) -> Result<Json<ScheduleList>, ApiError> {
    Ok(Json(ScheduleList {
        items: state.queue.list_schedules().await?,
    }))
}

#[utoipa::path(get, path = "/api/queue/schedules/{id}", tag = "schedules", params(("id" = String, Path, description = "the schedule id")),
    responses((status = 200, body = Schedule), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    _user: User,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Schedule>, ApiError> {
    Ok(Json(state.queue.get_schedule(&id).await?))
}

#[utoipa::path(delete, path = "/api/queue/schedules/{id}", tag = "schedules", params(("id" = String, Path, description = "the schedule id")),
    responses((status = 204, description = "deleted; the jobs it made stay"), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn remove(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    user.require_operator()?;
    state.queue.delete_schedule(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/queue/schedules/{id}/pause", tag = "schedules", params(("id" = String, Path, description = "the schedule id")),
    responses((status = 200, description = "paused: no slot makes a job until it is resumed", body = Schedule), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn pause(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Schedule>, ApiError> {
    user.require_operator()?;
    Ok(Json(state.queue.pause_schedule(&id).await?))
}

#[utoipa::path(post, path = "/api/queue/schedules/{id}/resume", tag = "schedules", params(("id" = String, Path, description = "the schedule id")),
    responses((status = 200, description = "resumed from its next slot after now (the slots it was paused through are not run)", body = Schedule), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn resume(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Schedule>, ApiError> {
    user.require_operator()?;
    Ok(Json(state.queue.resume_schedule(&id).await?))
}
