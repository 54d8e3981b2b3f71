//! Jobs that no person submitted: each is made once by its source (a GitHub delivery, a
//! schedule's slot), however often the source comes and whichever replica takes it.

use contract::Job;
use contract::source::JobSource;
use serde_json::Value;

use super::Queue;
use crate::error::QueueError;

impl Queue {
    /// Queues the job request `raw` made by `source`, once per source: `true` beside the
    /// job when the source had made it already.
    pub async fn create_sourced_job(
        &self,
        raw: &Value,
        created_by: Option<&str>,
        source: &JobSource,
    ) -> Result<(Job, bool), QueueError> {
        if let Some(made) = self.job_of_source(source).await? {
            return Ok((made, true));
        }
        let mut raw = raw.clone();
        let Some(payload) = raw.get_mut("payload").and_then(Value::as_object_mut) else {
            return Err(QueueError::invalid("payload", "required: an object"));
        };
        let source_value = serde_json::to_value(source)
            .map_err(|e| QueueError::invalid("source", e.to_string()))?;
        payload.insert("source".into(), source_value);
        match self.insert_job(&raw, created_by).await {
            Ok(job) => Ok((job, false)),
            // Another replica took the same source a moment before: its unique key kept
            // the second out.
            Err(error) => match self.job_of_source(source).await? {
                Some(made) => Ok((made, true)),
                None => Err(error),
            },
        }
    }

    async fn job_of_source(&self, source: &JobSource) -> Result<Option<Job>, QueueError> {
        match self.inner.db.job_of_source(source).await? {
            Some(id) => Ok(Some(self.get_job(&id).await?)),
            None => Ok(None),
        }
    }
}
