//! The worker's side of a job's lease: until when it holds the job by its own clock, and
//! the watchdog that stops the run when it was not renewed in time (the heartbeats that
//! renew it are `heartbeat.rs`). A worker that may have lost its lease must not act on it: another worker may
//! already run the job again, and two pushes of one job would fight over its branch.
//!
//! The clock is conservative. A renewal counts from the moment its request was *sent*: the
//! server starts the lease when it handles the request, later, so the worker's idea of the
//! end is never after the server's (clocks tick at the same rate; they need not agree on
//! the time). The run stops a safety margin before that end.

use std::sync::Arc;
use std::time::Duration;

use contract::{Job, JobId};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::QueueClient;

/// One job's lease as this worker holds it. Cheap to clone.
#[derive(Clone)]
pub struct Lease {
    inner: Arc<Inner>,
}

struct Inner {
    job_id: JobId,
    attempt: u32,
    duration: Duration,
    margin: Duration,
    /// The end of the lease by this worker's clock; renewals move it on.
    until: watch::Sender<Instant>,
    /// Fired when the lease was taken back (a 409) or ran out unrenewed.
    lost: CancellationToken,
}

impl Lease {
    /// The lease of `duration` that a claim sent at `claimed_at` obtained.
    pub fn new(job_id: &JobId, attempt: u32, duration: Duration, claimed_at: Instant) -> Lease {
        let (until, _) = watch::channel(claimed_at + duration);
        Lease {
            inner: Arc::new(Inner {
                job_id: *job_id,
                attempt,
                duration,
                margin: margin(duration),
                until,
                lost: CancellationToken::new(),
            }),
        }
    }

    /// A heartbeat sent at `sent_at` succeeded.
    pub fn renewed(&self, sent_at: Instant) {
        let until = sent_at + self.inner.duration;
        self.inner.until.send_if_modified(|current| {
            let later = until > *current;
            if later {
                *current = until;
            }
            later
        });
    }

    /// How long the worker may still act on the job, the safety margin kept.
    pub fn remaining(&self) -> Duration {
        let end = *self.inner.until.borrow() - self.inner.margin;
        end.saturating_duration_since(Instant::now())
    }

    /// Whether the worker may still act on the job: not lost, and time left.
    pub fn is_held(&self) -> bool {
        !self.inner.lost.is_cancelled() && !self.remaining().is_zero()
    }

    /// Fired once the lease is lost.
    pub fn lost(&self) -> &CancellationToken {
        &self.inner.lost
    }

    pub fn job_id(&self) -> &JobId {
        &self.inner.job_id
    }

    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// How often heartbeats renew it: every third of it, at most every 20 s.
    pub fn heartbeat_every(&self) -> Duration {
        (self.inner.duration / 3).clamp(Duration::from_millis(200), Duration::from_secs(20))
    }

    /// Renews it now, once: the job as the server has it, which says whether a cancel or
    /// a pause was asked for.
    pub async fn renew(&self, client: &QueueClient) -> Result<Job, crate::client::ClientError> {
        let sent_at = Instant::now();
        let seconds = self.inner.duration.as_secs().max(1);
        let job = client
            .heartbeat(&self.inner.job_id, self.inner.attempt, Some(seconds))
            .await?;
        self.renewed(sent_at);
        Ok(job)
    }

    /// Renews it until it succeeds, while it is held: the gate before an act that cannot
    /// be taken back (the push), and the last read of the job's steps. `Ok` is the job as
    /// the renewal found it; `Err` says why not.
    pub async fn confirm(&self, client: &QueueClient) -> Result<Job, String> {
        let mut wait = Duration::from_millis(100);
        loop {
            if !self.is_held() {
                return Err(self.why_lost());
            }
            match self.renew(client).await {
                Ok(job) => return Ok(job),
                Err(error) if error.status().is_some_and(|s| s.is_client_error()) => {
                    self.inner.lost.cancel();
                    return Err(format!("the server took the lease back ({error})"));
                }
                Err(error) => {
                    tracing::warn!(job = %self.inner.job_id, %error, "cannot confirm the lease; retrying while it lasts");
                }
            }
            tokio::time::sleep(wait.min(self.remaining())).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    fn why_lost(&self) -> String {
        format!(
            "the lease of job {} was not renewed in time (the server could not be reached for about {} s)",
            self.inner.job_id,
            self.inner.duration.as_secs()
        )
    }

    /// Stops the run (`cancel`) when the lease ends unrenewed, a margin before its end by
    /// this worker's clock; returns when `done` fires or the lease is lost.
    pub async fn watch(&self, cancel: CancellationToken, done: CancellationToken) {
        let mut until = self.inner.until.subscribe();
        loop {
            let end = *until.borrow_and_update() - self.inner.margin;
            tokio::select! {
                _ = done.cancelled() => return,
                _ = self.inner.lost.cancelled() => {
                    cancel.cancel();
                    return;
                }
                changed = until.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(end) => {
                    if *until.borrow() - self.inner.margin <= Instant::now() {
                        tracing::warn!(
                            job = %self.inner.job_id,
                            "{}: stopping the run, publishing nothing; the server gives the job to another worker once the lease is over",
                            self.why_lost()
                        );
                        self.inner.lost.cancel();
                        cancel.cancel();
                        return;
                    }
                }
            }
        }
    }
}

/// How long before the lease's end (by the worker's clock) the worker stops acting: room
/// for a push under way to be stopped, and for the server's clock to run a little faster.
fn margin(lease: Duration) -> Duration {
    (lease / 6).clamp(Duration::from_millis(500), Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_JOB: &str = "0190a000-0000-7000-8000-0000000000c1";

    #[tokio::test(start_paused = true)]
    async fn an_unrenewed_lease_stops_the_run_a_margin_before_its_end() {
        let lease = Lease::new(
            &TEST_JOB.parse().unwrap(),
            1,
            Duration::from_secs(60),
            Instant::now(),
        );
        let (cancel, done) = (CancellationToken::new(), CancellationToken::new());
        let watcher = tokio::spawn({
            let (lease, cancel, done) = (lease.clone(), cancel.clone(), done.clone());
            async move { lease.watch(cancel, done).await }
        });
        tokio::time::sleep(Duration::from_secs(45)).await;
        lease.renewed(Instant::now());
        // Renewed at 45 s: now held until 105 s, less the 10 s margin.
        tokio::time::sleep(Duration::from_secs(49)).await;
        assert!(!cancel.is_cancelled() && lease.is_held());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(cancel.is_cancelled());
        assert!(lease.lost().is_cancelled() && !lease.is_held());
        watcher.await.unwrap();
        drop(done);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_never_moves_the_end_back() {
        let start = Instant::now();
        let lease = Lease::new(
            &TEST_JOB.parse().unwrap(),
            1,
            Duration::from_secs(30),
            start,
        );
        lease.renewed(start + Duration::from_secs(20));
        lease.renewed(start + Duration::from_secs(5));
        assert_eq!(
            lease.remaining(),
            Duration::from_secs(50) - margin(Duration::from_secs(30))
        );
    }
}
