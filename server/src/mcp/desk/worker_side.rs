//! The worker's side of the desk: claim, heartbeat, finish and upload, for a worker token
//! only, under the worker routes' own rules (`crate::http::api::worker`): the token's
//! scope narrows a claim, and every write is fenced by the attempt it claimed.

use contract::api::{ClaimBody, HeartbeatBody};
use contract::{Artifact, Job, JobId};
use queue::TokenRecord;

use super::{Desk, Result, refusal, remote};
use crate::http::api::worker::{claim_job, heartbeat_job};
use crate::http::auth::Worker;

impl Desk {
    pub async fn claim(&self, body: ClaimBody) -> Result<Option<Job>> {
        match self {
            Desk::Local { state, token, .. } => claim_job(state, &worker(token)?, body)
                .await
                .map_err(refusal),
            Desk::Remote(client) => client.claim(&body).await.map_err(remote),
        }
    }

    pub async fn heartbeat(
        &self,
        id: &JobId,
        attempt: u32,
        lease_seconds: Option<u64>,
    ) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                let body = HeartbeatBody {
                    worker_id: None,
                    attempt: Some(attempt),
                    lease_seconds,
                };
                heartbeat_job(state, &worker(token)?, id, body)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client
                .heartbeat(id, attempt, lease_seconds)
                .await
                .map_err(remote),
        }
    }

    pub async fn complete(&self, id: &JobId, attempt: u32, summary: Option<String>) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                let fence = worker(token)?.fence(None, Some(attempt)).map_err(refusal)?;
                state
                    .queue
                    .complete(id, &fence, summary)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client
                .complete(id, attempt, summary.as_deref())
                .await
                .map_err(remote),
        }
    }

    pub async fn fail(
        &self,
        id: &JobId,
        attempt: u32,
        message: String,
        retryable: bool,
    ) -> Result<Job> {
        match self {
            Desk::Local { state, token, .. } => {
                let fence = worker(token)?.fence(None, Some(attempt)).map_err(refusal)?;
                state
                    .queue
                    .fail(id, &fence, message, retryable)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client
                .fail(id, attempt, &message, retryable)
                .await
                .map_err(remote),
        }
    }

    pub async fn upload(
        &self,
        id: &JobId,
        attempt: u32,
        name: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> Result<Artifact> {
        match self {
            Desk::Local { state, token, .. } => {
                let fence = worker(token)?.fence(None, Some(attempt)).map_err(refusal)?;
                state
                    .queue
                    .add_artifact(id, &fence, name, content_type, &bytes)
                    .await
                    .map_err(refusal)
            }
            Desk::Remote(client) => client
                .upload_artifact(id, attempt, name, content_type, bytes)
                .await
                .map_err(remote),
        }
    }
}

/// The worker routes' rule: a worker token, whose name is the worker's id.
fn worker(token: &TokenRecord) -> Result<Worker> {
    Worker::from_token(token.clone()).map_err(refusal)
}
