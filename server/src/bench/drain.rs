//! The benches' workers: W loops that claim jobs and complete them through the service,
//! one per call or a batch per call, until a target is done or the queue is empty.
//!
//! Two paces. `Sequential`: claim, then complete, then claim again. `Overlapped`: a loop
//! writes the completions of what it claimed last while it claims its next jobs, because
//! graphile-worker's runner does not await `completeJob` before its next fetch either, and
//! the side-by-side comparison should not make only one side wait. A loop keeps at most one
//! completion (or batch) in flight, and checks its answer before it claims again after that.
//! `Finishing`: one call completes what was claimed and claims the next
//! (`Queue::complete_and_claim`, the worker API's `complete-and-claim`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use contract::Job;
use queue::{ClaimRequest, Completion, Fence, Queue};

use crate::cli::error::CliError;

pub(super) const CAPABILITIES: [&str; 3] = ["codex", "git", "gh"];

/// How a worker loop orders its claims and completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pace {
    /// Claim, then complete what was claimed, then claim again.
    Sequential,
    /// Complete what was claimed last while claiming the next.
    Overlapped,
    /// Complete what was claimed and claim the next in one call; one job per call only.
    Finishing,
}

fn claim_request(worker: usize) -> ClaimRequest {
    ClaimRequest {
        worker_id: format!("bench-{worker}"),
        capabilities: CAPABILITIES.iter().map(|c| c.to_string()).collect(),
        allowed_types: None,
        allowed_repositories: None,
        lease: Duration::from_secs(300),
        max_running_per_repository: None,
    }
}

/// Runs `workers` claim-and-complete loops until `target` jobs are done (or, without a
/// target, until the queue is empty); returns how many were completed. With `batch` above
/// 1, each loop claims and completes up to that many jobs per call.
pub(super) async fn drain(
    queue: &Queue,
    workers: usize,
    target: Option<usize>,
    batch: u32,
    pace: Pace,
) -> Result<usize, CliError> {
    let completed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..workers {
        let worker = Worker {
            queue: queue.clone(),
            request: claim_request(w),
            batch,
            target,
            completed: completed.clone(),
        };
        tasks.push(tokio::spawn(async move {
            match pace {
                Pace::Sequential => worker.sequential().await,
                Pace::Overlapped => worker.overlapped().await,
                Pace::Finishing => worker.finishing().await,
            }
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| CliError::Bench(format!("a worker task failed: {e}")))??;
    }
    Ok(completed.load(Ordering::Relaxed))
}

struct Worker {
    queue: Queue,
    request: ClaimRequest,
    batch: u32,
    target: Option<usize>,
    completed: Arc<AtomicUsize>,
}

impl Worker {
    fn target_met(&self) -> bool {
        self.target
            .is_some_and(|t| self.completed.load(Ordering::Relaxed) >= t)
    }

    async fn sequential(&self) -> Result<(), CliError> {
        while !self.target_met() {
            let jobs = self.claim().await?;
            if jobs.is_empty() && self.target.is_none() {
                return Ok(());
            }
            self.complete(&jobs).await?;
        }
        Ok(())
    }

    async fn overlapped(&self) -> Result<(), CliError> {
        let mut claimed: Vec<Job> = Vec::new();
        loop {
            if self.target_met() {
                return self.complete(&claimed).await;
            }
            let (next, done) = tokio::join!(self.claim(), self.complete(&claimed));
            done?;
            let next = next?;
            // What was in hand is written: an empty claim means nothing is left.
            if next.is_empty() && self.target.is_none() {
                return Ok(());
            }
            claimed = next;
        }
    }

    async fn finishing(&self) -> Result<(), CliError> {
        let mut held = self.claim().await?;
        loop {
            let Some(job) = held.pop() else {
                if self.target.is_none() || self.target_met() {
                    return Ok(());
                }
                held = self.claim().await?;
                continue;
            };
            if self.target_met() {
                return self.complete(&[job]).await;
            }
            let fence = Fence::new(self.request.worker_id.clone(), job.attempt);
            let (_, next) = self
                .queue
                .complete_and_claim(&job.id, &fence, None, &self.request, 1)
                .await?;
            self.completed.fetch_add(1, Ordering::Relaxed);
            held = next;
        }
    }

    /// The next jobs: one per call (with a short long-poll when a target says producers
    /// are still at work), or up to a batch.
    async fn claim(&self) -> Result<Vec<Job>, CliError> {
        if self.batch > 1 {
            let jobs = self.queue.claim_many(&self.request, self.batch).await?;
            if jobs.is_empty() && self.target.is_some() {
                // Producers are behind: a batch claim has no long-poll, so look again soon.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            return Ok(jobs);
        }
        let job = match self.target {
            None => self.queue.claim(&self.request).await?,
            Some(_) => {
                self.queue
                    .claim_wait(&self.request, Duration::from_millis(200))
                    .await?
            }
        };
        Ok(job.into_iter().collect())
    }

    /// Completes `jobs`, one per call or in one batch, and counts them once written.
    async fn complete(&self, jobs: &[Job]) -> Result<(), CliError> {
        let fence = |job: &Job| Fence::new(self.request.worker_id.clone(), job.attempt);
        match jobs {
            [] => {}
            [job] if self.batch == 1 => {
                self.queue.complete(&job.id, &fence(job), None).await?;
            }
            jobs => {
                let completions = jobs
                    .iter()
                    .map(|job| Completion {
                        id: job.id,
                        fence: fence(job),
                        summary: None,
                    })
                    .collect();
                for answer in self.queue.complete_many(completions).await? {
                    answer?;
                }
            }
        }
        self.completed.fetch_add(jobs.len(), Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::JobState;

    async fn queue_of(jobs: usize) -> (tempfile::TempDir, Queue) {
        let dir = tempfile::tempdir().unwrap();
        let db = queue::Database::open_data_dir(dir.path()).await.unwrap();
        let queue = Queue::open(db, queue::QueueConfig::new(dir.path().join("artifacts")))
            .await
            .unwrap();
        queue.migrate().await.unwrap();
        for i in 0..jobs {
            queue
                .create_job(&super::super::queue_args::noop_task(i), Some("bench"))
                .await
                .unwrap();
        }
        (dir, queue)
    }

    const PACES: [(Pace, u32); 5] = [
        (Pace::Sequential, 1),
        (Pace::Overlapped, 1),
        (Pace::Finishing, 1),
        (Pace::Sequential, 4),
        (Pace::Overlapped, 4),
    ];

    /// Every job is completed once, by either pace, one per call and batched, whether the
    /// loops stop on an empty queue or on a target.
    #[tokio::test]
    async fn every_pace_completes_every_job_once() {
        for (pace, batch) in PACES {
            for target in [None, Some(23)] {
                let (_dir, queue) = queue_of(23).await;
                let done = drain(&queue, 3, target, batch, pace).await.unwrap();
                let case = format!("{pace:?}, batches of {batch}, target {target:?}");
                assert_eq!(done, 23, "{case}");
                let states = queue.count_jobs_by_state().await.unwrap();
                assert_eq!(states, vec![(JobState::Succeeded, 23)], "{case}");
            }
        }
    }

    /// Loops that stop on a target short of the queue still complete what they hold: no
    /// job is left running, and every completed one is counted.
    #[tokio::test]
    async fn a_target_met_leaves_nothing_claimed() {
        for (pace, batch) in PACES {
            let (_dir, queue) = queue_of(40).await;
            let done = drain(&queue, 3, Some(10), batch, pace).await.unwrap();
            let case = format!("{pace:?}, batches of {batch}");
            let states = queue.count_jobs_by_state().await.unwrap();
            let succeeded = states
                .iter()
                .find(|(state, _)| *state == JobState::Succeeded)
                .map_or(0, |(_, n)| *n);
            assert!(done >= 10, "{case}: {done}");
            assert_eq!(succeeded, done as u64, "{case}: {states:?}");
            assert!(
                states
                    .iter()
                    .all(|(state, _)| matches!(state, JobState::Succeeded | JobState::Queued)),
                "{case}: {states:?}"
            );
        }
    }
}
