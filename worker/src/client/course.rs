//! The routes that steer a job's course (user token): pause, resume, retry from a step,
//! append steps, approve or reject at the gate before publish.

use contract::api::{AppendStepsBody, PauseBody, RejectBody, ResumeBody, RetryBody};
use contract::{Job, JobId};
use reqwest::Method;

use super::{QueueClient, Result};

impl QueueClient {
    /// `POST /jobs/{id}/pause`: pauses a queued job, or asks the running one's worker to
    /// stop at the next boundary (at once when `immediate`).
    pub async fn pause_job(&self, id: &JobId, immediate: bool) -> Result<Job> {
        let url = self.job_url(id, &["pause"]);
        let body = PauseBody { immediate };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/resume`: queues a paused job again, from `checkpoint` (an id such
    /// as `step-2`) or the one it paused at.
    pub async fn resume_job(&self, id: &JobId, checkpoint: Option<&str>) -> Result<Job> {
        let url = self.job_url(id, &["resume"]);
        let body = ResumeBody {
            checkpoint: checkpoint.map(str::to_string),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/retry`: runs a job that ended again, from the step at
    /// `from_step_index` (by default the one that failed).
    pub async fn retry_job(&self, id: &JobId, from_step_index: Option<usize>) -> Result<Job> {
        let url = self.job_url(id, &["retry"]);
        let body = RetryBody { from_step_index };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/steps`: adds `steps` (an array of step objects or a markdown
    /// checklist) after the job's own.
    pub async fn append_steps(&self, id: &JobId, steps: &serde_json::Value) -> Result<Job> {
        let url = self.job_url(id, &["steps"]);
        let body = AppendStepsBody {
            steps: steps.clone(),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/follow-up`: queues an ended job again as its next round, to run
    /// `steps` (an array of step objects or a markdown checklist).
    pub async fn follow_up(&self, id: &JobId, steps: &serde_json::Value) -> Result<Job> {
        let url = self.job_url(id, &["follow-up"]);
        let body = contract::api::FollowUpBody {
            steps: Some(steps.clone()),
            instructions: None,
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `POST /jobs/{id}/budget`: sets the job's budget, replacing the one it had.
    pub async fn set_budget(&self, id: &JobId, budget: &contract::JobBudget) -> Result<Job> {
        let url = self.job_url(id, &["budget"]);
        self.fetch(self.request(Method::POST, &url).json(budget), &url)
            .await
    }

    /// `POST /jobs/{id}/approve`: queues a job awaiting approval to publish.
    pub async fn approve_job(&self, id: &JobId) -> Result<Job> {
        let url = self.job_url(id, &["approve"]);
        self.fetch(self.request(Method::POST, &url), &url).await
    }

    /// `POST /jobs/{id}/reject`: fails a job awaiting approval; nothing is published.
    pub async fn reject_job(&self, id: &JobId, reason: Option<&str>) -> Result<Job> {
        let url = self.job_url(id, &["reject"]);
        let body = RejectBody {
            reason: reason.map(str::to_string),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }
}
