//! What workers do with jobs they hold: claim, heartbeat, report events, finish, and
//! acknowledge a cancel. Every write carries the fence (the worker + the attempt it
//! claimed), or is fenced on the lease its worker holds when it names no attempt.
//! The bodies are the contract's (`contract::api`), which the worker's client sends.
//! MCP's worker tools go through `claim_job` and `heartbeat_job` too, so a claim or a
//! heartbeat follows the same rules whichever door it came through.

use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use contract::api::{
    ClaimBody, Claimed, CompleteAndClaimBody, CompleteBody, Completed, CompletedAndClaimed,
    EventBody, FailBody, FenceBody, HeartbeatBody,
};
use contract::{FieldError, Job, JobEvent};
use queue::{ClaimRequest, Fence};

use super::extract::JobPath;
use super::json::ApiJson;
use crate::http::auth::Worker;
use crate::http::error::ApiError;
use crate::http::state::{AppState, Limits};
use contract::api::ErrorBody;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/jobs/claim", post(claim))
        .route("/jobs/{id}/heartbeat", post(heartbeat))
        .route("/jobs/{id}/complete", post(complete))
        .route("/jobs/{id}/complete-and-claim", post(complete_and_claim))
        .route("/jobs/{id}/fail", post(fail))
        .route("/jobs/{id}/events", post(append_event))
        .route("/jobs/{id}/cancel/ack", post(ack_cancel))
        .route("/jobs/{id}/pause/ack", post(ack_pause))
        .route("/jobs/{id}/resume/patch", post(resume_patch))
        .route("/jobs/{id}/resume/session", post(resume_session))
        .route("/jobs/{id}/approval/request", post(request_approval))
}

fn lease(limits: &Limits, seconds: Option<u64>) -> Result<Duration, ApiError> {
    match seconds {
        None => Ok(limits.default_lease),
        Some(0) => Err(field("leaseSeconds", "must be at least 1")),
        Some(s) if Duration::from_secs(s) > limits.max_lease => Err(field(
            "leaseSeconds",
            format!("at most {} seconds", limits.max_lease.as_secs()),
        )),
        Some(s) => Ok(Duration::from_secs(s)),
    }
}

fn field(path: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid(vec![FieldError::new(path, message)])
}

#[utoipa::path(post, path = "/api/queue/jobs/claim", tag = "workers", request_body = ClaimBody,
    responses((status = 200, description = "the claimed job, or null when none came within waitSeconds", body = Claimed), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn claim(
    State(state): State<AppState>,
    worker: Worker,
    ApiJson(body): ApiJson<ClaimBody>,
) -> Result<Json<Claimed>, ApiError> {
    let job = claim_job(&state, &worker, body).await?;
    Ok(Json(Claimed { job }))
}

/// The next job `worker` may run, leased to it, or `None` when none came within the
/// body's wait: the body narrowed by the token's scope, the lease and the wait bounded.
pub(crate) async fn claim_job(
    state: &AppState,
    worker: &Worker,
    body: ClaimBody,
) -> Result<Option<Job>, ApiError> {
    let (request, wait) = claim_request(state, worker, body).await?;
    Ok(if wait.is_zero() {
        state.queue.claim(&request).await?
    } else {
        state.queue.claim_wait(&request, wait).await?
    })
}

/// The claim a body asks for, narrowed by the token's scope, with its wait; the worker
/// is noted as seen.
async fn claim_request(
    state: &AppState,
    worker: &Worker,
    body: ClaimBody,
) -> Result<(ClaimRequest, Duration), ApiError> {
    worker.check_worker_id(body.worker_id.as_deref())?;
    let capabilities =
        Worker::narrow(body.capabilities, &worker.token.capabilities).unwrap_or_default();
    let request = ClaimRequest {
        worker_id: worker.worker_id().to_string(),
        capabilities: capabilities
            .into_iter()
            .map(|c| c.trim().to_lowercase())
            .collect(),
        allowed_types: Worker::narrow(body.allowed_types, &worker.token.allowed_job_types),
        allowed_repositories: worker.token.allowed_repositories.clone(),
        lease: lease(&state.limits, body.lease_seconds)?,
        max_running_per_repository: body.max_running_per_repository,
    };
    let wait = match body.wait_seconds {
        None => Duration::ZERO,
        // Clamped before it becomes a Duration: a huge number (1e20) is a long wait,
        // not a reason to panic.
        Some(s) if s.is_finite() && s >= 0.0 => {
            let max = state.limits.max_claim_wait;
            Duration::try_from_secs_f64(s).map_or(max, |wait| wait.min(max))
        }
        Some(_) => {
            return Err(field(
                "waitSeconds",
                "must be a number of seconds, 0 or more",
            ));
        }
    };
    request.validate()?;
    let sighting = queue::Sighting {
        capabilities: Some(&request.capabilities),
        version: body.worker_version.as_deref(),
        sandbox: body.sandbox.as_deref(),
    };
    seen(state, &request.worker_id, &sighting).await?;
    Ok((request, wait))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/heartbeat", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = HeartbeatBody,
    responses((status = 200, body = Job), (status = 409, description = "the lease is not this worker's and attempt's, or the job's state forbids it", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn heartbeat(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<HeartbeatBody>,
) -> Result<Json<Job>, ApiError> {
    Ok(Json(heartbeat_job(&state, &worker, &id, body).await?))
}

/// Renews `worker`'s lease on job `id` for the body's lease (or the default).
pub(crate) async fn heartbeat_job(
    state: &AppState,
    worker: &Worker,
    id: &contract::JobId,
    body: HeartbeatBody,
) -> Result<Job, ApiError> {
    let fence = fence_of(state, worker, id, body.worker_id.as_deref(), body.attempt).await?;
    let lease = lease(&state.limits, body.lease_seconds)?;
    seen(state, worker.worker_id(), &queue::Sighting::default()).await?;
    Ok(state.queue.heartbeat(id, &fence, lease).await?)
}

/// The fence of a worker write: the attempt the body names, or, when it names none (the
/// seed system's worker sends none), the attempt of the lease this worker holds on the job
/// now. The write is fenced on it either way.
pub(crate) async fn fence_of(
    state: &AppState,
    worker: &Worker,
    id: &contract::JobId,
    claimed: Option<&str>,
    attempt: Option<u32>,
) -> Result<Fence, ApiError> {
    match attempt {
        Some(_) => worker.fence(claimed, attempt),
        None => {
            worker.check_worker_id(claimed)?;
            Ok(state.queue.held_fence(id, worker.worker_id()).await?)
        }
    }
}

/// Notes that the worker is alive. Bookkeeping: a failure to write it is logged, never
/// the worker's problem; only what the worker sent wrong (a NUL in its version) is.
async fn seen(state: &AppState, id: &str, sighting: &queue::Sighting<'_>) -> Result<(), ApiError> {
    match state.queue.worker_seen(id, sighting).await {
        Ok(()) => Ok(()),
        Err(error @ queue::QueueError::Invalid(_)) => Err(error.into()),
        Err(error) => {
            tracing::warn!(worker = %id, %error, "could not record the worker as seen");
            Ok(())
        }
    }
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/complete", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = CompleteBody,
    responses((status = 200, body = Job), (status = 409, description = "the lease is not this worker's and attempt's, or the job's state forbids it", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn complete(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<CompleteBody>,
) -> Result<Json<Job>, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    Ok(Json(
        state
            .queue
            .complete(&id, &fence, body.result_summary)
            .await?,
    ))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/complete-and-claim", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = CompleteAndClaimBody,
    responses((status = 200, description = "the job completed, and the next job leased to this worker, or null when none came within the claim's waitSeconds", body = CompletedAndClaimed), (status = 409, description = "the lease is not this worker's and attempt's, or the job's state forbids it: nothing was claimed", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn complete_and_claim(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<CompleteAndClaimBody>,
) -> Result<Json<CompletedAndClaimed>, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    let (request, wait) = claim_request(&state, &worker, body.claim)
        .await
        .map_err(|refused| refused.within("claim"))?;
    let (completed, next) = state
        .queue
        .complete_and_claim(&id, &fence, body.result_summary, &request, 1)
        .await?;
    let job = match next.into_iter().next() {
        Some(job) => Some(job),
        None if wait.is_zero() => None,
        None => state.queue.claim_wait(&request, wait).await?,
    };
    let completed = Completed::from(&completed);
    Ok(Json(CompletedAndClaimed { completed, job }))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/fail", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = FailBody,
    responses((status = 200, body = Job), (status = 409, description = "the lease is not this worker's and attempt's, or the job's state forbids it", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn fail(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<FailBody>,
) -> Result<Json<Job>, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    Ok(Json(
        state
            .queue
            .fail(&id, &fence, body.error_message, body.retryable)
            .await?,
    ))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/events", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = EventBody,
    responses((status = 200, body = JobEvent), (status = 409, description = "the lease is not this worker's and attempt's, or the job's state forbids it", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn append_event(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<EventBody>,
) -> Result<Json<JobEvent>, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    Ok(Json(
        state
            .queue
            .append_event(&id, &fence, body.into_event())
            .await?,
    ))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/cancel/ack", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = FenceBody,
    responses((status = 200, body = Job), (status = 409, description = "the lease is not this worker's and attempt's, or the job's state forbids it", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn ack_cancel(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<FenceBody>,
) -> Result<Json<Job>, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    Ok(Json(state.queue.ack_cancel(&id, &fence).await?))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/pause/ack", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = FenceBody,
    responses((status = 200, description = "paused at the latest checkpoint this attempt saved (cancelled if a cancel was requested too)", body = Job), (status = 409, description = "the lease is not this worker's and attempt's, or no pause was requested", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn ack_pause(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<FenceBody>,
) -> Result<Json<Job>, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    Ok(Json(state.queue.ack_pause(&id, &fence).await?))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/resume/patch", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = FenceBody,
    responses((status = 200, description = "the patch of the checkpoint this attempt resumes from (`resumeFrom`), for its prepare stage to apply", content_type = "text/x-diff", body = Vec<u8>), (status = 409, description = "the lease is not this worker's and attempt's", body = ErrorBody), (status = 404, description = "the attempt resumes from no checkpoint, or its patch is gone", body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn resume_patch(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<FenceBody>,
) -> Result<axum::response::Response, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    let (artifact, content) = state.queue.resume_patch(&id, &fence).await?;
    Ok(streamed(artifact, content, "text/x-diff"))
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/resume/session", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = FenceBody,
    responses((status = 200, description = "the agent session the job's worker kept (`session/agent.json`), for a later attempt or round to continue", content_type = "application/json", body = Vec<u8>), (status = 409, description = "the lease is not this worker's and attempt's", body = ErrorBody), (status = 404, description = "no session was kept", body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn resume_session(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<FenceBody>,
) -> Result<axum::response::Response, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    let (artifact, content) = state.queue.resume_session(&id, &fence).await?;
    Ok(streamed(artifact, content, "application/json"))
}

/// An artifact's bytes as they are read from storage, with its type and length.
fn streamed(
    artifact: contract::Artifact,
    content: queue::ArtifactContent,
    content_type: &'static str,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut response = axum::body::Body::from_stream(content.into_stream()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static(content_type),
    );
    headers.insert(
        axum::http::header::CONTENT_LENGTH,
        axum::http::HeaderValue::from(artifact.size),
    );
    response
}

#[utoipa::path(post, path = "/api/queue/jobs/{id}/approval/request", tag = "workers", params(("id" = String, Path, description = "the job id")), request_body = FenceBody,
    responses((status = 200, description = "awaiting approval at the latest checkpoint this attempt saved, the lease released (cancelled if a cancel was requested)", body = Job), (status = 409, description = "the lease is not this worker's and attempt's, or the job is approved already", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn request_approval(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    ApiJson(body): ApiJson<FenceBody>,
) -> Result<Json<Job>, ApiError> {
    let fence = fence_of(
        &state,
        &worker,
        &id,
        body.worker_id.as_deref(),
        body.attempt,
    )
    .await?;
    Ok(Json(state.queue.request_approval(&id, &fence).await?))
}
