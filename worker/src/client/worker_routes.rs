//! The worker routes of the client (worker token): claim, heartbeat, finish, report
//! events, acknowledge a cancel, upload an artifact. Every write names the attempt the
//! job was claimed with.

use contract::api::worker::upload;
use contract::api::{
    ClaimBody, Claimed, CompleteAndClaimBody, CompleteBody, CompletedAndClaimed, EventBody,
    FailBody, FenceBody, HeartbeatBody,
};
use contract::{Artifact, Job, JobEvent, JobId, NewEvent};
use reqwest::Method;

use super::{QueueClient, Result};

impl QueueClient {
    /// `POST /jobs/claim` (worker token): the next job this worker may run, leased to it,
    /// or `None` when there is none (after waiting up to `waitSeconds`). `capabilities`
    /// are the tools this machine has, which the worker token's own list narrows further;
    /// `waitSeconds` long-polls (the server caps it, 30 s by default).
    pub async fn claim(&self, body: &ClaimBody) -> Result<Option<Job>> {
        let url = self.url(&["jobs", "claim"]);
        let builder = self.request(Method::POST, &url).json(body);
        let claimed: Claimed = self.fetch(builder, &url).await?;
        Ok(claimed.job)
    }

    /// `POST /jobs/{id}/heartbeat` (worker token): renews the lease; the returned job
    /// tells whether a cancel was requested meanwhile.
    pub async fn heartbeat(
        &self,
        id: &JobId,
        attempt: u32,
        lease_seconds: Option<u64>,
    ) -> Result<Job> {
        let url = self.job_url(id, &["heartbeat"]);
        let body = HeartbeatBody {
            worker_id: None,
            attempt: Some(attempt),
            lease_seconds,
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/complete` (worker token).
    pub async fn complete(&self, id: &JobId, attempt: u32, summary: Option<&str>) -> Result<Job> {
        let url = self.job_url(id, &["complete"]);
        let body = CompleteBody {
            worker_id: None,
            attempt: Some(attempt),
            result_summary: summary.map(str::to_string),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/complete-and-claim` (worker token): completes the job, then claims
    /// the next as [`claim`](Self::claim) does with `next`, in one call; answers the job
    /// completed and the next one, if any came. A refused completion claims nothing.
    pub async fn complete_and_claim(
        &self,
        id: &JobId,
        attempt: u32,
        summary: Option<&str>,
        next: &ClaimBody,
    ) -> Result<CompletedAndClaimed> {
        let url = self.job_url(id, &["complete-and-claim"]);
        let body = CompleteAndClaimBody {
            worker_id: None,
            attempt: Some(attempt),
            result_summary: summary.map(str::to_string),
            claim: next.clone(),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/fail` (worker token): `retryable` requeues the job while attempts
    /// remain; otherwise it fails for good.
    pub async fn fail(
        &self,
        id: &JobId,
        attempt: u32,
        message: &str,
        retryable: bool,
    ) -> Result<Job> {
        let url = self.job_url(id, &["fail"]);
        let body = FailBody {
            worker_id: None,
            attempt: Some(attempt),
            error_message: message.to_string(),
            retryable,
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/events` (worker token): appends to the job's timeline. Kinds
    /// starting with `job.` are the queue's own and are refused.
    pub async fn append_event(
        &self,
        id: &JobId,
        attempt: u32,
        event: &NewEvent,
    ) -> Result<JobEvent> {
        let url = self.job_url(id, &["events"]);
        let body = EventBody::new(attempt, event.clone());
        let builder = self.request(Method::POST, &url).json(&body);
        self.fetch(builder, &url).await
    }

    /// `POST /jobs/{id}/pause/ack` (worker token): the worker stopped for a pause; the
    /// job is paused at its latest checkpoint (or cancelled, when a cancel came too).
    pub async fn ack_pause(&self, id: &JobId, attempt: u32) -> Result<Job> {
        let url = self.job_url(id, &["pause", "ack"]);
        let body = FenceBody {
            worker_id: None,
            attempt: Some(attempt),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/approval/request` (worker token): the steps are done and the task
    /// wants approval; the job waits, its lease released.
    pub async fn request_approval(&self, id: &JobId, attempt: u32) -> Result<Job> {
        let url = self.job_url(id, &["approval", "request"]);
        let body = FenceBody {
            worker_id: None,
            attempt: Some(attempt),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/resume/patch` (worker token): the patch of the checkpoint this
    /// attempt resumes from.
    pub async fn resume_patch(&self, id: &JobId, attempt: u32) -> Result<Vec<u8>> {
        let url = self.job_url(id, &["resume", "patch"]);
        let body = FenceBody {
            worker_id: None,
            attempt: Some(attempt),
        };
        let response = self
            .send(self.request(Method::POST, &url).json(&body), &url)
            .await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport(&url, e))?;
        Ok(bytes.to_vec())
    }

    /// `POST /jobs/{id}/resume/session` (worker token): the agent session the job's worker
    /// kept, or `None` when none was.
    pub async fn resume_session(&self, id: &JobId, attempt: u32) -> Result<Option<Vec<u8>>> {
        let url = self.job_url(id, &["resume", "session"]);
        let body = FenceBody {
            worker_id: None,
            attempt: Some(attempt),
        };
        let response = match self
            .send(self.request(Method::POST, &url).json(&body), &url)
            .await
        {
            Ok(response) => response,
            Err(e) if e.status() == Some(reqwest::StatusCode::NOT_FOUND) => return Ok(None),
            Err(e) => return Err(e),
        };
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport(&url, e))?;
        Ok(Some(bytes.to_vec()))
    }

    /// `POST /jobs/{id}/cancel/ack` (worker token): the worker stopped; the job is cancelled.
    pub async fn ack_cancel(&self, id: &JobId, attempt: u32) -> Result<Job> {
        let url = self.job_url(id, &["cancel", "ack"]);
        let body = FenceBody {
            worker_id: None,
            attempt: Some(attempt),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/artifacts/upload` (worker token): stores `bytes` under the
    /// relative path `name` (`logs/execute.log`); the same name again replaces it.
    pub async fn upload_artifact(
        &self,
        id: &JobId,
        attempt: u32,
        name: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> Result<Artifact> {
        let url = self.job_url(id, &["artifacts", "upload"]);
        let file_name = name.rsplit('/').next().unwrap_or(name).to_string();
        let form = reqwest::multipart::Form::new()
            .text(upload::ATTEMPT, attempt.to_string())
            .text(upload::NAME, name.to_string())
            .text(upload::CONTENT_TYPE, content_type.to_string())
            .part(
                upload::FILE,
                reqwest::multipart::Part::bytes(bytes).file_name(file_name),
            );
        let builder = self.request(Method::POST, &url).multipart(form);
        self.fetch(builder, &url).await
    }
}
