//! Where a tool's call goes: the queue service itself, as the caller's token (MCP over
//! HTTP inside the server), or a server's REST API (`stepwise mcp` over stdio, which runs
//! on another machine like the CLI). Every tool goes through here, so both transports
//! answer the same, and the role rules are the REST API's.

use contract::api::{ErrorBody, ErrorCode};
use contract::job::task;
use contract::{Artifact, Job, JobEvent, JobId, JobState};
use queue::{JobFilter, TokenRecord};
use worker::client::{ClientError, QueueClient};

use crate::http::AppState;
use crate::http::auth::User;
use crate::http::error::ApiError;

mod worker_side;

pub type Result<T> = std::result::Result<T, ErrorBody>;

/// The non-log events of a job are read for its progress a page at a time, up to a bound
/// (as the job page reads them): every step, stage, iteration and checkpoint of a task.
const PROGRESS_PAGE: u32 = 1000;
const PROGRESS_EVENTS: usize = 20_000;

/// What the MCP handler was started over.
#[derive(Clone)]
pub enum Source {
    /// Inside the server: the caller is the bearer token of each HTTP request.
    Local(AppState),
    /// Outside it: every call is a REST request made with the token the process was given.
    Remote(QueueClient),
}

/// One call's way to the queue, as one caller. Made once per call (or per subscription),
/// so the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Desk {
    Local {
        state: AppState,
        token: TokenRecord,
        /// Where the caller reached the server (`https://host`), for links to pages.
        base: Option<String>,
    },
    Remote(QueueClient),
}

/// The bytes of an artifact read for a tool, cut at a limit.
pub struct ArtifactRead {
    pub artifact: Artifact,
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

impl Desk {
    /// The dashboard page of job `id`, when the server's address is known.
    pub fn page_url(&self, id: &JobId) -> Option<String> {
        let base = match self {
            Desk::Local { base, .. } => base.clone()?,
            Desk::Remote(client) => client.base_url().as_str().to_string(),
        };
        Some(format!("{}/tasks/queue/{id}", base.trim_end_matches('/')))
    }

    /// Submits a job request (the REST API's JSON envelope), as an operator.
    pub async fn submit(&self, request: &serde_json::Value) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .create_job(request, Some(&token.name))
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.create_job(request).await.map_err(remote),
        }
    }

    pub async fn job(&self, id: &JobId) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?;
                state.queue.get_job(id).await.map_err(refusal)
            }
            Desk::Remote(client) => client.get_job(id).await.map_err(remote),
        }
    }

    /// A page of jobs, newest first, and the cursor of the next.
    pub async fn jobs(
        &self,
        status: Option<JobState>,
        limit: Option<u32>,
        cursor: Option<String>,
    ) -> Result<(Vec<Job>, Option<String>)> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?;
                let filter = JobFilter {
                    status,
                    job_type: None,
                    limit,
                    after: cursor,
                };
                let page = state.queue.list_jobs(&filter).await.map_err(refusal)?;
                Ok((page.jobs, page.next_cursor))
            }
            Desk::Remote(client) => client
                .list_jobs(status, None, limit, cursor.as_deref())
                .await
                .map_err(remote),
        }
    }

    /// The job's events after `after`, oldest first.
    pub async fn events(&self, id: &JobId, after: i64, limit: u32) -> Result<Vec<JobEvent>> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?;
                state
                    .queue
                    .list_events(id, after, limit)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client
                .list_events(id, Some(after), Some(limit))
                .await
                .map_err(remote),
        }
    }

    /// The events that tell a job's progress (every kind but log lines), oldest first.
    pub async fn progress_events(&self, id: &JobId) -> Result<Vec<JobEvent>> {
        let mut events: Vec<JobEvent> = Vec::new();
        loop {
            let after = events.last().map_or(0, |e| e.id);
            let page = match self {
                Desk::Local { state, token, .. } => {
                    user(token)?;
                    state
                        .queue
                        .list_events_except(id, task::STEP_LOG, after, PROGRESS_PAGE)
                        .await
                        .map_err(refusal)?
                }
                Desk::Remote(client) => client
                    .list_events_except(id, task::STEP_LOG, after, PROGRESS_PAGE)
                    .await
                    .map_err(remote)?,
            };
            let full = page.len() == PROGRESS_PAGE as usize;
            events.extend(page);
            if !full || events.len() >= PROGRESS_EVENTS {
                return Ok(events);
            }
        }
    }

    /// Cancels a job as the REST route does: at once when queued, on request when running.
    pub async fn cancel(&self, id: &JobId, reason: Option<&str>) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .request_cancel(id, Some(&token.name), reason.map(str::to_string))
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.cancel_job(id, reason).await.map_err(remote),
        }
    }

    /// Pauses the job: at once when queued; a running one's worker stops at the next
    /// boundary (at once when `immediate`).
    pub async fn pause(&self, id: &JobId, immediate: bool) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .request_pause(id, Some(&token.name), immediate)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.pause_job(id, immediate).await.map_err(remote),
        }
    }

    /// Queues a paused job again, from `checkpoint` or the one it paused at.
    pub async fn resume(&self, id: &JobId, checkpoint: Option<&str>) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .resume(id, Some(&token.name), checkpoint)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.resume_job(id, checkpoint).await.map_err(remote),
        }
    }

    /// Runs a job that ended again, from the step at `from_step_index`.
    pub async fn retry(&self, id: &JobId, from_step_index: Option<usize>) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .retry_from_step(id, Some(&token.name), from_step_index)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.retry_job(id, from_step_index).await.map_err(remote),
        }
    }

    /// Approves a job awaiting approval: it is queued to publish.
    pub async fn approve(&self, id: &JobId) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .approve(id, Some(&token.name))
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.approve_job(id).await.map_err(remote),
        }
    }

    /// Rejects a job awaiting approval: it fails, nothing is published.
    pub async fn reject(&self, id: &JobId, reason: Option<&str>) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .reject(id, Some(&token.name), reason.map(str::to_string))
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.reject_job(id, reason).await.map_err(remote),
        }
    }

    /// Adds `steps` after the job's own.
    pub async fn append_steps(&self, id: &JobId, steps: &serde_json::Value) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                state
                    .queue
                    .append_steps(id, Some(&token.name), steps)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.append_steps(id, steps).await.map_err(remote),
        }
    }

    /// Queues an ended job again as its next round, to run `steps`.
    pub async fn follow_up(&self, id: &JobId, steps: &serde_json::Value) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?.require_operator().map_err(refusal)?;
                let body = serde_json::json!({ "steps": steps });
                state
                    .queue
                    .follow_up(id, Some(&token.name), &body)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client.follow_up(id, steps).await.map_err(remote),
        }
    }

    pub async fn artifacts(&self, id: &JobId) -> Result<Vec<Artifact>> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?;
                state.queue.list_artifacts(id).await.map_err(refusal)
            }
            Desk::Remote(client) => client.list_artifacts(id).await.map_err(remote),
        }
    }

    /// The artifact named `name` (`logs/steps/step-0001.log`), its first `max_bytes`.
    pub async fn artifact(&self, id: &JobId, name: &str, max_bytes: u64) -> Result<ArtifactRead> {
        match self {
            Desk::Local { state, token, .. } => {
                user(token)?;
                let (artifact, content) =
                    state.queue.open_artifact(id, name).await.map_err(refusal)?;
                let (bytes, truncated) = content.read_start(max_bytes).await.map_err(refusal)?;
                Ok(ArtifactRead {
                    artifact,
                    bytes,
                    truncated,
                })
            }
            Desk::Remote(client) => {
                let artifact = client
                    .list_artifacts(id)
                    .await
                    .map_err(remote)?
                    .into_iter()
                    .find(|a| a.name == name)
                    .ok_or_else(|| {
                        ErrorBody::new(
                            ErrorCode::ArtifactNotFound,
                            format!("artifact {id}/{name} not found"),
                        )
                    })?;
                let mut bytes = client
                    .download_artifact(id, &artifact.id)
                    .await
                    .map_err(remote)?;
                let limit = usize::try_from(max_bytes).unwrap_or(usize::MAX);
                let truncated = bytes.len() > limit;
                bytes.truncate(limit);
                Ok(ArtifactRead {
                    artifact,
                    bytes,
                    truncated,
                })
            }
        }
    }
}

/// The REST API's rule for the routes people use: a user token with a role.
fn user(token: &TokenRecord) -> Result<User> {
    User::from_token(token.clone()).map_err(ApiError::into_body)
}

/// A queue refusal as the REST API words it; an internal failure is logged and its
/// cause kept out of the answer.
pub fn refusal(error: impl Into<ApiError>) -> ErrorBody {
    error.into().into_body()
}

/// A REST answer as the same body; a server that cannot be reached says so, with what to
/// check (the client's own words, which never hold the token).
pub(super) fn remote(error: ClientError) -> ErrorBody {
    match error {
        ClientError::Api {
            code,
            message,
            errors,
            ..
        } => ErrorBody {
            code,
            message,
            errors,
        },
        other => ErrorBody::new(ErrorCode::InternalError, other.to_string()),
    }
}

/// Text that is not a job id gets the answer an unknown id gets, as over REST.
pub(in crate::mcp) fn parse_id(text: &str) -> std::result::Result<JobId, ErrorBody> {
    text.parse::<JobId>()
        .map_err(|e| refusal(queue::QueueError::from(e)))
}

pub(in crate::mcp) fn internal(error: rmcp::ErrorData) -> ErrorBody {
    ErrorBody::new(ErrorCode::InternalError, error.message)
}
