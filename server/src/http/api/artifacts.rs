//! Job artifacts: workers upload logs, patches and results; people list and download them.

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use contract::api::ArtifactList;
use contract::api::worker::upload;
use contract::{Artifact, FieldError};

use super::extract::{ApiPath, JobPath};
use crate::http::auth::{User, Worker};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use contract::api::ErrorBody;

/// Room for the multipart framing and the small text fields around the file itself.
const MULTIPART_OVERHEAD: usize = 64 * 1024;

pub fn router(max_artifact_bytes: u64) -> Router<AppState> {
    Router::new()
        .route("/jobs/{id}/artifacts", get(list))
        .route("/jobs/{id}/artifacts/{artifact_id}/download", get(download))
        .route(
            "/jobs/{id}/artifacts/upload",
            post(upload).layer(upload_limit(max_artifact_bytes)),
        )
}

fn upload_limit(max_artifact_bytes: u64) -> DefaultBodyLimit {
    DefaultBodyLimit::max(
        usize::try_from(max_artifact_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(MULTIPART_OVERHEAD),
    )
}

#[utoipa::path(get, path = "/api/queue/jobs/{id}/artifacts", tag = "artifacts", params(("id" = String, Path, description = "the job id")),
    responses((status = 200, body = ArtifactList), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    _user: User,
    JobPath(id): JobPath,
) -> Result<Json<ArtifactList>, ApiError> {
    Ok(Json(ArtifactList {
        items: state.queue.list_artifacts(&id).await?,
    }))
}

#[utoipa::path(get, path = "/api/queue/jobs/{id}/artifacts/{artifact_id}/download", tag = "artifacts",
    params(("id" = String, Path), ("artifact_id" = String, Path)),
    responses((status = 200, description = "the bytes, as an attachment", content_type = "application/octet-stream", body = Vec<u8>), (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn download(
    State(state): State<AppState>,
    _user: User,
    JobPath(id): JobPath,
    ApiPath((_, artifact_id)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let (artifact, content) = state.queue.artifact_by_id(&id, &artifact_id).await?;
    // Streamed as it is read (from a file, or from the database a few chunks at a time).
    let body = Body::from_stream(content.into_stream());
    let file_name = artifact
        .name
        .rsplit('/')
        .next()
        .unwrap_or("artifact")
        .replace('"', "");
    let mut response = body.into_response();
    let headers = response.headers_mut();
    // Artifacts are written by agents: never let a browser run one as a page of ours.
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&artifact.content_type)
            .unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{file_name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(artifact.size));
    Ok(response)
}

/// The upload's form fields, for the API document (the handler reads them one by one).
#[allow(dead_code)]
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "camelCase")]
struct UploadForm {
    /// The artifact's relative path, e.g. `logs/steps/step-0001.log`.
    name: String,
    /// The attempt the job was claimed with; left out, the lease this worker holds now.
    attempt: Option<u32>,
    worker_id: Option<String>,
    /// Default: the file part's content type.
    content_type: Option<String>,
    /// `sha256:<hex>` of the file: checked against what arrived (422 when it differs).
    digest: Option<String>,
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// `multipart/form-data` with the fields `name` (the artifact's relative path), optionally
/// `attempt`, `workerId`, `contentType` and `digest`, and `file` (the bytes; its part's content type
/// is used when `contentType` is absent).
#[utoipa::path(post, path = "/api/queue/jobs/{id}/artifacts/upload", tag = "workers", params(("id" = String, Path, description = "the job id")),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 201, body = Artifact), (status = 413, description = "larger than the artifact limit", body = ErrorBody), (status = 409, description = "the lease is not this worker's and attempt's, or the job's state forbids it", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "no valid worker token", body = ErrorBody), (status = 403, description = "not this worker's token", body = ErrorBody)))]
async fn upload(
    State(state): State<AppState>,
    worker: Worker,
    JobPath(id): JobPath,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<(axum::http::StatusCode, Json<Artifact>), ApiError> {
    let mut multipart = multipart.map_err(|e| {
        ApiError::bad_request(format!(
            "send the artifact as multipart/form-data with a boundary: {}",
            e.body_text()
        ))
    })?;
    let mut name = None;
    let mut attempt = None;
    let mut worker_id = None;
    let mut content_type = None;
    let mut digest = None;
    let mut file: Option<(queue::Incoming, Option<String>)> = None;
    while let Some(part) = multipart.next_field().await.map_err(multipart_error)? {
        let part_name = part.name().unwrap_or_default().to_string();
        match part_name.as_str() {
            upload::FILE => {
                let part_type = part.content_type().map(str::to_string);
                file = Some((receive(&state.queue, part).await?, part_type));
            }
            upload::NAME => name = Some(part.text().await.map_err(multipart_error)?),
            upload::ATTEMPT => attempt = Some(part.text().await.map_err(multipart_error)?),
            upload::WORKER_ID => worker_id = Some(part.text().await.map_err(multipart_error)?),
            upload::CONTENT_TYPE => {
                content_type = Some(part.text().await.map_err(multipart_error)?)
            }
            upload::DIGEST => digest = Some(part.text().await.map_err(multipart_error)?),
            other => {
                return Err(ApiError::invalid(vec![FieldError::new(
                    other,
                    "unknown field; send name, file and optionally attempt, workerId, contentType and digest",
                )]));
            }
        }
    }
    let mut errors = Vec::new();
    if name.as_deref().is_none_or(|n| n.trim().is_empty()) {
        errors.push(FieldError::new(
            upload::NAME,
            "required: the artifact's relative path, e.g. logs/execute.log",
        ));
    }
    let attempt = match attempt.as_deref().map(str::trim).map(str::parse::<u32>) {
        Some(Ok(a)) => Some(a),
        Some(Err(_)) => {
            errors.push(FieldError::new(upload::ATTEMPT, "must be a whole number"));
            None
        }
        None => None,
    };
    let digest = match digest.as_deref().map(parse_digest) {
        Some(Ok(hex)) => Some(hex),
        Some(Err(message)) => {
            errors.push(FieldError::new(upload::DIGEST, message));
            None
        }
        None => None,
    };
    if file.is_none() {
        errors.push(FieldError::new(
            upload::FILE,
            "required: the artifact's bytes",
        ));
    }
    let (Some(name), Some((incoming, part_type)), true) = (name, file, errors.is_empty()) else {
        return Err(ApiError::invalid(errors));
    };
    if let Some(expected) = digest
        && expected != incoming.sha256()
    {
        return Err(ApiError::invalid(vec![FieldError::new(
            upload::DIGEST,
            format!(
                "sha256:{expected} is not the digest of the file received (sha256:{}): it was damaged on the way; send it again",
                incoming.sha256()
            ),
        )]));
    }
    let fence =
        super::worker::fence_of(&state, &worker, &id, worker_id.as_deref(), attempt).await?;
    let content_type = content_type
        .or(part_type)
        .unwrap_or_else(|| "application/octet-stream".to_string());
    let artifact = state
        .queue
        .store_artifact(&id, &fence, name.trim(), &content_type, incoming)
        .await?;
    Ok((axum::http::StatusCode::CREATED, Json(artifact)))
}

/// The hex of a `sha256:<hex>` digest, lowercased; anything else is refused, saying so.
fn parse_digest(digest: &str) -> Result<String, &'static str> {
    let hex = digest
        .trim()
        .strip_prefix("sha256:")
        .ok_or("must be sha256:<64 hex digits>, the SHA-256 of the file")?;
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err("must be sha256:<64 hex digits>, the SHA-256 of the file")
    }
}

/// Receives the file part aside as it arrives (never whole in memory). A body that breaks
/// off or grows past the limit is the client's problem, said as such.
async fn receive(
    queue: &queue::Queue,
    part: axum::extract::multipart::Field<'_>,
) -> Result<queue::Incoming, ApiError> {
    use futures_util::TryStreamExt;
    let broke = std::sync::Mutex::new(None);
    let bytes = part.map_err(|e| {
        let io = std::io::Error::other(e.body_text());
        *broke.lock().unwrap() = Some(e);
        io
    });
    let received = queue
        .receive_artifact(tokio_util::io::StreamReader::new(bytes))
        .await;
    match (received, broke.into_inner().unwrap()) {
        (Ok(incoming), _) => Ok(incoming),
        (Err(_), Some(e)) => Err(multipart_error(e)),
        (Err(e), None) => Err(e.into()),
    }
}

fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(format!(
            "the upload is larger than the artifact limit: {}",
            e.body_text()
        ))
    } else {
        ApiError::bad_request(format!(
            "the multipart body could not be read: {}",
            e.body_text()
        ))
    }
}
