//! An operator's hold on a job's course: pause it, resume it, retry it from a step,
//! approve or reject it at the gate before publish. The worker's side (its acknowledgement
//! of a pause, its request for approval) is with the worker routes.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use contract::api::{
    AppendStepsBody, ErrorBody, FollowUpBody, PauseBody, RejectBody, ResumeBody, RetryBody,
};
use contract::{Job, JobBudget};

use super::extract::JobPath;
use super::json::ApiJson;
use crate::http::auth::User;
use crate::http::error::ApiError;
use crate::http::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/jobs/{id}/pause", post(pause))
        .route("/jobs/{id}/resume", post(resume))
        .route("/jobs/{id}/retry", post(retry))
        .route("/jobs/{id}/approve", post(approve))
        .route("/jobs/{id}/reject", post(reject))
        .route("/jobs/{id}/steps", post(append_steps))
        .route("/jobs/{id}/budget", post(set_budget))
        .route("/jobs/{id}/follow-up", post(follow_up))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/pause", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = PauseBody, description = "optional; `immediate` stops the running step"),
    responses((status = 200, description = "paused if it was queued; pause requested if running (`pauseRequested`); unchanged if already paused", body = Job),
        (status = 409, description = "the job has ended, or a cancel is under way", body = ErrorBody), (status = 422, body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn pause(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    body: axum::body::Bytes,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    let body: PauseBody = super::json::optional(&body)?;
    let job = state
        .queue
        .request_pause(&id, Some(user.user_id()), body.immediate)
        .await?;
    Ok(Json(job))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/resume", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = ResumeBody, description = "optional; `checkpoint` picks another checkpoint than the one it paused at"),
    responses((status = 200, description = "queued again from its checkpoint (`resumeFrom`); a pause not yet obeyed is withdrawn", body = Job),
        (status = 409, description = "the job has ended: retry it instead", body = ErrorBody), (status = 422, description = "no such checkpoint", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn resume(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    body: axum::body::Bytes,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    let body: ResumeBody = super::json::optional(&body)?;
    let checkpoint = body.checkpoint.filter(|c| !c.trim().is_empty());
    let job = state
        .queue
        .resume(&id, Some(user.user_id()), checkpoint.as_deref())
        .await?;
    Ok(Json(job))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/retry", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = RetryBody, description = "optional; `fromStepIndex` picks the step, by default the one that failed"),
    responses((status = 200, description = "queued again for a new attempt that restores the checkpoint before the step", body = Job),
        (status = 409, description = "the job has not failed, been cancelled or dead-lettered", body = ErrorBody), (status = 422, description = "no such step, or no checkpoint before it", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn retry(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    body: axum::body::Bytes,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    let body: RetryBody = super::json::optional(&body)?;
    let job = state
        .queue
        .retry_from_step(&id, Some(user.user_id()), body.from_step_index)
        .await?;
    Ok(Json(job))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/approve", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    responses((status = 200, description = "queued again to publish its kept work, no step run again; unchanged if already approved", body = Job),
        (status = 409, description = "the job is not awaiting approval", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn approve(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    Ok(Json(state.queue.approve(&id, Some(user.user_id())).await?))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/reject", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = RejectBody, description = "optional; the reason becomes the job's error"),
    responses((status = 200, description = "failed with the reason; nothing published", body = Job),
        (status = 409, description = "the job is not awaiting approval", body = ErrorBody), (status = 422, body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn reject(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    body: axum::body::Bytes,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    let body: RejectBody = super::json::optional(&body)?;
    let reason = body.reason.filter(|r| !r.trim().is_empty());
    let job = state
        .queue
        .reject(&id, Some(user.user_id()), reason)
        .await?;
    Ok(Json(job))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/steps", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = AppendStepsBody, description = "the steps to add, checked as at submit"),
    responses((status = 200, description = "the job with the steps added; a job awaiting approval goes back to the queue to run them", body = Job),
        (status = 409, description = "the job is running (pause it first) or has ended", body = ErrorBody), (status = 422, description = "each invalid step field, as `steps[i]…`", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn append_steps(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<AppendStepsBody>,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    let job = state
        .queue
        .append_steps(&id, Some(user.user_id()), &body.steps)
        .await?;
    Ok(Json(job))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/budget", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = JobBudget, description = "the job's new budget, replacing the one it had: each limit a positive number; at least one"),
    responses((status = 200, description = "the job with its budget set (`payload.task.budget`); one paused for its budget can then be resumed, if the new one is not spent", body = Job),
        (status = 422, description = "each invalid limit, by name (a price limit for a runtime that reports no price is one)", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn set_budget(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    let job = state
        .queue
        .set_budget(&id, Some(user.user_id()), &body)
        .await?;
    Ok(Json(job))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/follow-up", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = FollowUpBody, description = "the next round's steps (checked as at submit), or one step's instructions"),
    responses((status = 200, description = "queued again as its next round (`round`), to run only the new steps from what it last pushed (or its latest checkpoint), publishing to the same branch and pull request", body = Job),
        (status = 409, description = "the job has not ended (add steps instead), was cancelled or dead-lettered (retry it), or its budget is spent", body = ErrorBody), (status = 422, description = "each invalid step field, as `steps[i]…`", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn follow_up(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    let job = state
        .queue
        .follow_up(&id, Some(user.user_id()), &body)
        .await?;
    Ok(Json(job))
}
