//! Issue 39's second step, seen from the tables: a job has a narrow live row exactly while
//! it is queued or running, whichever way it gets there and leaves, and reads the same
//! from either row; no live row outlives its job's end.

use std::time::Duration;

use contract::{Job, JobState};
use queue::{Rescuer, RescuerConfig};

use crate::golden::{follow_up, run_step, task_job};
use crate::harness::*;

async fn live_rows(h: &Harness, job: &Job) -> i64 {
    h.count(&format!(
        "SELECT count(*) FROM job_queue WHERE id = '{}'",
        job.id
    ))
    .await
}

/// The job as it now reads, checked against its live row: one exactly while it is live.
async fn state(h: &Harness, job: &Job, expected: JobState) -> Job {
    let now = h.get(job).await;
    assert_eq!(now.status, expected);
    let live = matches!(expected, JobState::Queued | JobState::Running);
    assert_eq!(live_rows(h, job).await, i64::from(live), "{expected}");
    now
}

pub async fn a_job_has_a_live_row_exactly_while_it_is_queued_or_running(h: Harness) {
    let job = task_job(&h, true).await;
    state(&h, &job, JobState::Queued).await;
    // A retryable failure and a lost lease queue it again.
    let claimed = h.claim_exactly("w1", &job).await;
    state(&h, &job, JobState::Running).await;
    h.queue
        .fail(&job.id, &fence(&claimed), "flaky".into(), true)
        .await
        .unwrap();
    state(&h, &job, JobState::Queued).await;
    h.advance(Duration::from_secs(60));
    h.claim_exactly("w1", &job).await;
    h.advance(LEASE + Duration::from_millis(1));
    Rescuer::new(h.queue.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    state(&h, &job, JobState::Queued).await;
    // Paused and resumed; held at the gate and approved.
    h.advance(Duration::from_secs(60));
    let claimed = h.claim_exactly("w1", &job).await;
    run_step(&h, &claimed, 0).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    state(&h, &job, JobState::Running).await;
    h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    state(&h, &job, JobState::Paused).await;
    h.queue.resume(&job.id, Some("alice"), None).await.unwrap();
    state(&h, &job, JobState::Queued).await;
    let claimed = h.claim_exactly("w2", &job).await;
    h.queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    state(&h, &job, JobState::AwaitingApproval).await;
    h.queue.approve(&job.id, Some("alice")).await.unwrap();
    state(&h, &job, JobState::Queued).await;
    // Cancelled while running, retried from a step, completed, followed up.
    let claimed = h.claim_exactly("w2", &job).await;
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    let asked = state(&h, &job, JobState::Running).await;
    assert!(asked.cancel_requested_at.is_some());
    h.queue.ack_cancel(&job.id, &fence(&claimed)).await.unwrap();
    state(&h, &job, JobState::Cancelled).await;
    h.queue
        .retry_from_step(&job.id, Some("alice"), Some(1))
        .await
        .unwrap();
    state(&h, &job, JobState::Queued).await;
    let claimed = h.claim_exactly("w3", &job).await;
    let beat = h
        .queue
        .heartbeat(&job.id, &fence(&claimed), LEASE)
        .await
        .unwrap();
    assert_eq!(state(&h, &job, JobState::Running).await, beat);
    let done = h
        .queue
        .complete(&job.id, &fence(&claimed), None)
        .await
        .unwrap();
    assert_eq!(state(&h, &job, JobState::Succeeded).await, done);
    follow_up(&h, &job).await;
    state(&h, &job, JobState::Queued).await;
    // Cancelled while queued.
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    state(&h, &job, JobState::Cancelled).await;
    assert_eq!(h.count("SELECT count(*) FROM job_queue").await, 0);
}

/// What a claim leases is the job as it reads after, its own row left as it was: the
/// attempt, the worker and the lease are the live row's.
pub async fn a_claimed_job_reads_its_lease_from_its_live_row(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    assert_eq!(claimed, h.get(&job).await);
    assert_eq!(
        (claimed.attempt, claimed.claimed_by.as_deref()),
        (1, Some("w1"))
    );
    let own = format!(
        "SELECT count(*) FROM jobs WHERE id = '{}' AND status = 'queued' AND attempt = 0 \
         AND claimed_by IS NULL",
        job.id
    );
    assert_eq!(h.count(&own).await, 1, "the claim wrote the job's own row");
    let done = h
        .queue
        .complete(&job.id, &fence(&claimed), Some("done".into()))
        .await
        .unwrap();
    assert_eq!(done, h.get(&job).await);
    assert_eq!((done.attempt, done.claimed_by.as_deref()), (1, Some("w1")));
}
