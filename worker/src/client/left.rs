//! What a job left, read back: its events (a page, all but one kind, or the live
//! stream), its artifacts and their bytes, its checkpoints.

use contract::api::{ArtifactList, CheckpointList, EventList};
use contract::timeline::Checkpoint;
use contract::{Artifact, JobEvent, JobId};
use reqwest::Method;

use super::{EventStream, QueueClient, Result};

impl QueueClient {
    /// `GET /jobs/{id}/events`: the timeline after event id `after`, oldest first, at most
    /// `limit` (the server's default page is 200).
    pub async fn list_events(
        &self,
        id: &JobId,
        after: Option<i64>,
        limit: Option<u32>,
    ) -> Result<Vec<JobEvent>> {
        let url = self.job_url(id, &["events"]);
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(after) = after {
            query.push(("after", after.to_string()));
        }
        if let Some(limit) = limit {
            query.push(("limit", limit.to_string()));
        }
        let builder = self.request(Method::GET, &url).query(&query);
        let list: EventList = self.fetch(builder, &url).await?;
        Ok(list.items)
    }

    /// `GET /jobs/{id}/events?except=KIND`: the first `limit` events of the job but those
    /// of kind `except` (a step's log lines, which outnumber the rest by far), oldest first.
    pub async fn list_events_except(
        &self,
        id: &JobId,
        except: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<JobEvent>> {
        let url = self.job_url(id, &["events"]);
        let query = [
            ("except", except.to_string()),
            ("after", after.to_string()),
            ("limit", limit.to_string()),
        ];
        let builder = self.request(Method::GET, &url).query(&query);
        let list: EventList = self.fetch(builder, &url).await?;
        Ok(list.items)
    }

    /// `GET /jobs/{id}/events/stream`: every event after `after`, then live ones as they
    /// happen, for as long as the stream is polled. See [`EventStream`] for how it
    /// reconnects and when it ends.
    pub fn stream_events(&self, id: &JobId, after: Option<i64>) -> EventStream {
        let segments = ["jobs", &id.to_string(), "events", "stream"]
            .map(String::from)
            .to_vec();
        EventStream::new(self.clone(), segments, after)
    }

    /// `GET /jobs/{id}/artifacts`.
    pub async fn list_artifacts(&self, id: &JobId) -> Result<Vec<Artifact>> {
        let url = self.job_url(id, &["artifacts"]);
        let list: ArtifactList = self.fetch(self.request(Method::GET, &url), &url).await?;
        Ok(list.items)
    }

    /// `GET /jobs/{id}/checkpoints`: the checkpoints saved, oldest first.
    pub async fn list_checkpoints(&self, id: &JobId) -> Result<Vec<Checkpoint>> {
        let url = self.job_url(id, &["checkpoints"]);
        let list: CheckpointList = self.fetch(self.request(Method::GET, &url), &url).await?;
        Ok(list.items)
    }

    /// `GET /jobs/{id}/artifacts/{artifact_id}/download`: the stored bytes.
    pub async fn download_artifact(&self, id: &JobId, artifact_id: &str) -> Result<Vec<u8>> {
        let url = self.job_url(id, &["artifacts", artifact_id, "download"]);
        let response = self.send(self.request(Method::GET, &url), &url).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport(&url, e))?;
        Ok(bytes.to_vec())
    }
}
