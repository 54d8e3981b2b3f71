//! The worker registry: who was seen when, with what, holding which jobs.

use contract::JobState;

use super::{JobFilter, Queue};
use crate::error::{QueueError, refuse_nul};
use crate::workers::{Sighting, WorkerRecord};

impl Queue {
    /// Records that worker `id` is alive: at a claim with what it offers (and its version
    /// and sandbox, if it said), at a heartbeat with none of these. Unchanged sightings are
    /// written at most every [`WRITE_EVERY`](crate::workers::WRITE_EVERY).
    pub async fn worker_seen(&self, id: &str, seen: &Sighting<'_>) -> Result<(), QueueError> {
        for (i, capability) in seen.capabilities.unwrap_or_default().iter().enumerate() {
            refuse_nul(&format!("capabilities[{i}]"), capability)?;
        }
        if let Some(version) = seen.version {
            refuse_nul("workerVersion", version)?;
        }
        if let Some(sandbox) = seen.sandbox {
            refuse_nul("sandbox", sandbox)?;
        }
        let now = self.now();
        if !self.inner.seen.should_write(id, seen, now) {
            return Ok(());
        }
        Ok(self.inner.db.upsert_worker(id, seen, now).await?)
    }

    /// Every worker seen, most recently seen first, with the jobs each holds now.
    pub async fn list_workers(&self) -> Result<Vec<WorkerRecord>, QueueError> {
        let mut workers = self.inner.db.list_workers().await?;
        let running = self
            .list_jobs(&JobFilter {
                status: Some(JobState::Running),
                limit: Some(JobFilter::MAX_LIMIT),
                ..JobFilter::default()
            })
            .await?;
        for job in running.jobs {
            let owner = workers
                .iter_mut()
                .find(|w| job.claimed_by.as_deref() == Some(w.id.as_str()));
            if let Some(owner) = owner {
                owner.running_jobs.push(job.id);
            }
        }
        Ok(workers)
    }
}
