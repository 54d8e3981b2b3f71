//! The rows this replica last wrote, so that a PostgreSQL transition on a job it has just
//! claimed or changed can go straight to its compare-and-set instead of reading the row
//! first: one round trip instead of two for nearly every heartbeat and completion.
//!
//! A remembered row is only ever a guess. The compare-and-set checks it against the row
//! itself, and a guess that is out of date (another replica or a rescuer moved the job)
//! costs one refused write and a normal read. Only writes are checked that way, so a
//! transition must not answer from a guess without writing (see `Queue::transition`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use contract::JobId;
use contract::job::Job;

/// How many rows are remembered at most. A worker's jobs live for minutes, so the rows
/// that matter are the few thousand in flight; past the bound everything is forgotten at
/// once, which costs each in-flight job one extra read and keeps the bookkeeping trivial.
const CAPACITY: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct LastWritten {
    rows: Mutex<HashMap<JobId, Arc<Job>>>,
}

impl LastWritten {
    /// The row as this replica last wrote it, if it still remembers it: shared, since a
    /// transition copies it only to change it.
    pub(crate) fn get(&self, id: &JobId) -> Option<Arc<Job>> {
        self.lock().get(id).cloned()
    }

    /// Remembers rows that were just committed. A finished job is forgotten: nothing but
    /// an idempotent cancel reaches it any more, and that is answered from the row.
    pub(crate) fn remember<'a>(&self, jobs: impl IntoIterator<Item = &'a Job>) {
        let mut rows = self.lock();
        for job in jobs {
            if job.status.is_terminal() {
                rows.remove(&job.id);
                continue;
            }
            if rows.len() >= CAPACITY && !rows.contains_key(&job.id) {
                rows.clear();
            }
            rows.insert(job.id, Arc::new(job.clone()));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Arc<Job>>> {
        // The map holds guesses only; one left half-written by a panic is still safe to use.
        self.rows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use contract::job::JobState;

    fn test_job(n: u128) -> Job {
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        Job {
            max_attempts: 3,
            ..Job::queued(uuid::Uuid::from_u128(n).into(), serde_json::json!({}), at)
        }
    }

    #[test]
    fn finished_jobs_are_forgotten() {
        let recent = LastWritten::default();
        let mut job = test_job(1);
        job.status = JobState::Running;
        recent.remember([&job]);
        assert_eq!(
            recent.get(&job.id).map(|j| j.status),
            Some(JobState::Running)
        );
        job.status = JobState::Succeeded;
        recent.remember([&job]);
        assert!(recent.get(&job.id).is_none());
    }

    #[test]
    fn the_map_never_grows_past_its_bound() {
        let recent = LastWritten::default();
        let jobs: Vec<Job> = (0..CAPACITY + 10).map(|i| test_job(i as u128)).collect();
        recent.remember(&jobs);
        assert!(recent.lock().len() <= CAPACITY);
        assert!(recent.get(&jobs[CAPACITY + 9].id).is_some());
    }
}
