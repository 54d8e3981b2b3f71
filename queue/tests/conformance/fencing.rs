//! A worker whose lease was taken back can no longer write anything for that job.

use std::time::Duration;

use contract::JobState;
use queue::{Rescuer, RescuerConfig};

use crate::harness::*;

async fn expire_and_rescue(h: &Harness) {
    h.advance(LEASE + Duration::from_millis(1));
    let report = Rescuer::new(h.queue.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    assert_eq!(report.requeued.len(), 1, "{report:?}");
    h.advance(Duration::from_secs(2));
}

pub async fn stale_worker_cannot_write_after_another_reclaimed_the_job(h: Harness) {
    let job = h.create(Spec::default()).await;
    let stale = h.claim_exactly("w1", &job).await;
    expire_and_rescue(&h).await;
    let current = h.claim_exactly("w2", &job).await;
    assert_eq!(current.attempt, 2);
    let f = fence(&stale);
    let mismatch = "job_ownership_mismatch";
    assert_code(h.queue.heartbeat(&job.id, &f, LEASE).await, mismatch);
    assert_code(h.queue.complete(&job.id, &f, None).await, mismatch);
    assert_code(h.queue.fail(&job.id, &f, "x".into(), true).await, mismatch);
    assert_code(h.queue.fail(&job.id, &f, "x".into(), false).await, mismatch);
    assert_code(
        h.queue
            .append_event(&job.id, &f, step_event("task.step.started"))
            .await,
        mismatch,
    );
    assert_code(
        h.queue
            .add_artifact(&job.id, &f, "logs/x.log", "text/plain", b"stale")
            .await,
        mismatch,
    );
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    assert_code(h.queue.ack_cancel(&job.id, &f).await, mismatch);

    let after = h.get(&job).await;
    assert_eq!(after.status, JobState::Running);
    assert_eq!(after.claimed_by.as_deref(), Some("w2"));
    assert_eq!(after.attempt, 2);
    assert_eq!(after.lease_expires_at, current.lease_expires_at);
    assert!(h.queue.list_artifacts(&job.id).await.unwrap().is_empty());
    assert!(
        !h.event_kinds(&job)
            .await
            .iter()
            .any(|k| k.starts_with("task."))
    );
    // The current lease holder is unaffected.
    h.queue.ack_cancel(&job.id, &fence(&current)).await.unwrap();
}

pub async fn stale_worker_cannot_complete_reclaimed_job(h: Harness) {
    let job = h.create(Spec::default()).await;
    let stale = h.claim_exactly("w1", &job).await;
    expire_and_rescue(&h).await;
    // The same worker claims it again: only the new attempt's fence is valid.
    let current = h.claim_exactly("w1", &job).await;
    assert_code(
        h.queue.complete(&job.id, &fence(&stale), None).await,
        "job_ownership_mismatch",
    );
    let done = h
        .queue
        .complete(&job.id, &fence(&current), None)
        .await
        .unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert_eq!(done.attempt, 2);
}

pub async fn requeued_job_refuses_its_former_worker(h: Harness) {
    let job = h.create(Spec::default()).await;
    let stale = h.claim_exactly("w1", &job).await;
    expire_and_rescue(&h).await;
    assert_code(
        h.queue.heartbeat(&job.id, &fence(&stale), LEASE).await,
        "job_ownership_mismatch",
    );
    assert_code(
        h.queue.complete(&job.id, &fence(&stale), None).await,
        "job_ownership_mismatch",
    );
    let after = h.get(&job).await;
    assert_eq!(after.status, JobState::Queued);
    assert_eq!(after.claimed_by, None);
}

pub async fn lease_expired_but_not_yet_taken_back_can_still_be_extended(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.advance(LEASE + Duration::from_secs(5));
    let beat = h
        .queue
        .heartbeat(&job.id, &fence(&claimed), LEASE)
        .await
        .unwrap();
    assert_eq!(beat.status, JobState::Running);
    let report = Rescuer::new(h.queue.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    assert_eq!(report.total(), 0);
}

/// A replica remembers the rows it wrote so that its next transition can skip a read
/// (PostgreSQL); whatever another replica did meanwhile must still decide the answer.
pub async fn a_replica_answers_from_the_row_not_from_what_it_last_wrote(h: Harness) {
    let other = h.queue_with(|_| {}).await;
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.advance(Duration::from_secs(1));
    other
        .request_cancel(&job.id, Some("bob"), Some("wrong repo".into()))
        .await
        .unwrap();
    h.advance(Duration::from_secs(1));
    let beat = h
        .queue
        .heartbeat(&job.id, &fence(&claimed), LEASE)
        .await
        .unwrap();
    assert_eq!(beat.cancel_requested_by_user_id.as_deref(), Some("bob"));
    assert_eq!(beat.cancel_reason.as_deref(), Some("wrong repo"));
    assert_eq!(beat, h.get(&job).await);

    // The other replica takes the lease back; the job was asked to stop, so it ends.
    h.advance(LEASE + Duration::from_secs(1));
    let report = Rescuer::new(other.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    assert_eq!(report.cancelled.len(), 1, "{report:?}");
    assert_conflict(
        h.queue.complete(&job.id, &fence(&claimed), None).await,
        JobState::Cancelled,
    );
    assert_conflict(
        h.queue.heartbeat(&job.id, &fence(&claimed), LEASE).await,
        JobState::Cancelled,
    );
    assert_eq!(h.get(&job).await.status, JobState::Cancelled);
}

/// The seed system's worker names no attempt: its writes are fenced on the lease it holds
/// when they arrive, so a worker whose lease was taken back still cannot write.
pub async fn a_worker_naming_no_attempt_is_fenced_on_the_lease_it_holds(h: Harness) {
    let job = h.create(Spec::default()).await;
    h.claim_exactly("w1", &job).await;
    let held = h.queue.held_fence(&job.id, "w1").await.unwrap();
    assert_eq!((held.worker_id.as_str(), held.attempt), ("w1", 1));
    let refused = assert_code(
        h.queue.held_fence(&job.id, "w2").await,
        "job_ownership_mismatch",
    );
    assert!(
        refused.to_string().contains(
            "w2 sent no attempt and holds no lease on the job: it is leased to w1 on attempt 1"
        ),
        "{refused}"
    );

    expire_and_rescue(&h).await;
    assert_code(
        h.queue.held_fence(&job.id, "w1").await,
        "job_ownership_mismatch",
    );
    h.claim_exactly("w2", &job).await;
    assert_code(
        h.queue.held_fence(&job.id, "w1").await,
        "job_ownership_mismatch",
    );
    // The fence w1 took before it lost the lease no longer writes.
    assert_code(
        h.queue.complete(&job.id, &held, None).await,
        "job_ownership_mismatch",
    );
    let current = h.queue.held_fence(&job.id, "w2").await.unwrap();
    assert_eq!(current.attempt, 2);
    h.queue.complete(&job.id, &current, None).await.unwrap();
    assert_code(
        h.queue.held_fence(&job.id, "w2").await,
        "job_state_conflict",
    );
}
