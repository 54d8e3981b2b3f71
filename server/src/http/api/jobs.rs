//! What people do with jobs: submit, list, read, cancel, read the timeline.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use contract::api::{CancelBody, CheckpointList, EventList, JobList};
use contract::{FieldError, Job, JobState};
use queue::JobFilter;
use serde::Deserialize;

use super::extract::{ApiQuery, JobPath};
use super::json::ApiJson;
use crate::http::auth::User;
use crate::http::error::ApiError;
use crate::http::state::AppState;
use contract::api::ErrorBody;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/jobs", post(create).get(list))
        .route("/jobs/{id}", get(show))
        .route("/jobs/{id}/cancel", post(cancel))
        .route("/jobs/{id}/events", get(events))
        .route("/jobs/{id}/checkpoints", get(checkpoints))
}

#[utoipa::path(post, path = "/api/queue/jobs", tag = "jobs",
    request_body(content = contract::JobRequest, description = "A task; `payload.task.steps` may also be a markdown checklist string. `notBefore` (an RFC 3339 time, at most 366 days ahead) schedules its start: it waits queued until then."),
    responses((status = 201, description = "queued; the normalized job", body = Job),
        (status = 422, description = "every invalid field", body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    user: User,
    ApiJson(raw): ApiJson<serde_json::Value>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    user.require_operator()?;
    let job = state.queue.create_job(&raw, Some(user.user_id())).await?;
    Ok((StatusCode::CREATED, Json(job)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    status: Option<String>,
    #[serde(rename = "type")]
    job_type: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/queue/jobs", tag = "jobs", params(ListQuery),
    responses((status = 200, description = "newest first", body = JobList), (status = 422, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    _user: User,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<JobList>, ApiError> {
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some(s) => Some(s.parse::<JobState>().map_err(|_| {
            let accepted: Vec<_> = JobState::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::invalid(vec![FieldError::new(
                "status",
                format!("unknown status; use one of {}", accepted.join(", ")),
            )])
        })?),
    };
    let filter = JobFilter {
        status,
        job_type: query.job_type,
        limit: query.limit,
        after: query.cursor,
    };
    let page = state.queue.list_jobs(&filter).await?;
    Ok(Json(JobList {
        items: page.jobs,
        next_cursor: page.next_cursor,
    }))
}

#[utoipa::path(get, path = "/api/queue/jobs/{id}", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    responses((status = 200, body = Job), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    _user: User,
    JobPath(id): JobPath,
) -> Result<Json<Job>, ApiError> {
    Ok(Json(state.queue.get_job(&id).await?))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/cancel", tag = "jobs", params(("id" = String, Path, description = "the job id")),
    request_body(content = CancelBody, description = "optional"),
    responses((status = 200, description = "cancelled if it was queued; cancel requested if running; unchanged if already cancelled", body = Job),
        (status = 409, description = "the job already finished otherwise", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn cancel(
    State(state): State<AppState>,
    user: User,
    JobPath(id): JobPath,
    body: axum::body::Bytes,
) -> Result<Json<Job>, ApiError> {
    user.require_operator()?;
    // The body is optional: `curl -X POST …/cancel` with nothing is a cancel without reason.
    let body: CancelBody = super::json::optional(&body)?;
    let reason = body.reason.filter(|r| !r.trim().is_empty());
    Ok(Json(
        state
            .queue
            .request_cancel(&id, Some(user.user_id()), reason)
            .await?,
    ))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct EventsQuery {
    after: Option<i64>,
    limit: Option<u32>,
    /// Leave out the events of this kind (`task.step.log`: a step's log lines, which
    /// outnumber every other kind by far).
    except: Option<String>,
}

const DEFAULT_EVENTS_PAGE: u32 = 200;

#[utoipa::path(get, path = "/api/queue/jobs/{id}/events", tag = "jobs", params(("id" = String, Path), EventsQuery),
    responses((status = 200, description = "oldest first, after the cursor", body = EventList), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn events(
    State(state): State<AppState>,
    _user: User,
    JobPath(id): JobPath,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<EventList>, ApiError> {
    let after = query.after.unwrap_or(0);
    let limit = query.limit.unwrap_or(DEFAULT_EVENTS_PAGE);
    let items = match query.except.as_deref().filter(|k| !k.is_empty()) {
        Some(kind) => {
            state
                .queue
                .list_events_except(&id, kind, after, limit)
                .await?
        }
        None => state.queue.list_events(&id, after, limit).await?,
    };
    Ok(Json(EventList { items }))
}

#[utoipa::path(get, path = "/api/queue/jobs/{id}/checkpoints", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, description = "the checkpoints saved, oldest first: after each step and each iteration, all the work so far as a patch against the base commit", body = CheckpointList), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn checkpoints(
    State(state): State<AppState>,
    _user: User,
    JobPath(id): JobPath,
) -> Result<Json<CheckpointList>, ApiError> {
    let items = state.queue.list_checkpoints(&id).await?;
    Ok(Json(CheckpointList { items }))
}
