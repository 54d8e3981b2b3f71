//! Cancellation (seed 002): queued at once, running cooperatively, never resurrected.

use std::time::Duration;

use contract::JobState;
use contract::job::events;
use queue::Fence;

use crate::harness::*;

pub async fn cancelling_a_queued_job_cancels_it_at_once(h: Harness) {
    let job = h.create(Spec::default()).await;
    h.advance(Duration::from_secs(3));
    let now = start_time() + Duration::from_secs(3);
    let cancelled = h
        .queue
        .request_cancel(&job.id, Some("bob"), Some("wrong repo".into()))
        .await
        .unwrap();
    assert_eq!(cancelled.status, JobState::Cancelled);
    assert_eq!(cancelled.finished_at, Some(now));
    assert_eq!(cancelled.cancel_requested_at, Some(now));
    assert_eq!(
        cancelled.cancel_requested_by_user_id.as_deref(),
        Some("bob")
    );
    assert_eq!(cancelled.cancel_reason.as_deref(), Some("wrong repo"));
    assert_eq!(h.get(&job).await, cancelled);
    let events = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, events::JOB_CANCELLED);
    assert_eq!(last.payload["requestedBy"], "bob");
    assert_eq!(last.payload["reason"], "wrong repo");
    assert_eq!(h.claim("w1").await, None);
}

pub async fn cancelling_a_running_job_only_marks_it(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.advance(Duration::from_secs(4));
    let marked = h
        .queue
        .request_cancel(&job.id, Some("bob"), None)
        .await
        .unwrap();
    assert_eq!(marked.status, JobState::Running);
    assert_eq!(marked.claimed_by.as_deref(), Some("w1"));
    assert_eq!(marked.lease_expires_at, claimed.lease_expires_at);
    assert_eq!(
        marked.cancel_requested_at,
        Some(start_time() + Duration::from_secs(4))
    );
    assert_eq!(marked.cancel_requested_by_user_id.as_deref(), Some("bob"));
    assert_eq!(marked.finished_at, None);
    assert_eq!(
        h.event_kinds(&job).await.last().map(String::as_str),
        Some(events::JOB_CANCEL_REQUESTED)
    );
    // The worker learns of it from its heartbeat.
    let beat = h
        .queue
        .heartbeat(&job.id, &fence(&claimed), LEASE)
        .await
        .unwrap();
    assert!(beat.cancel_requested());
    assert_eq!(beat.cancel_requested_by_user_id.as_deref(), Some("bob"));
}

pub async fn worker_acknowledges_a_requested_cancel(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .request_cancel(&job.id, Some("bob"), Some("stop".into()))
        .await
        .unwrap();
    h.advance(Duration::from_secs(2));
    let acked = h.queue.ack_cancel(&job.id, &fence(&claimed)).await.unwrap();
    assert_eq!(acked.status, JobState::Cancelled);
    assert_eq!(acked.claimed_by, None);
    assert_eq!(acked.lease_expires_at, None);
    assert_eq!(acked.attempt, 1);
    assert_eq!(
        acked.finished_at,
        Some(start_time() + Duration::from_secs(2))
    );
    assert_eq!(acked.cancel_reason.as_deref(), Some("stop"));
    assert_eq!(h.get(&job).await, acked);
    let events = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            events::JOB_CREATED,
            events::JOB_CLAIMED,
            events::JOB_CANCEL_REQUESTED,
            events::JOB_CANCELLED
        ]
    );
    assert_eq!(events[3].payload["workerId"], "w1");
    h.advance(Duration::from_secs(3600));
    assert_eq!(h.claim("w1").await, None);
}

pub async fn repeated_cancel_requests_are_no_ops(h: Harness) {
    let queued = h.create(Spec::default()).await;
    let running = h.create(Spec::default()).await;
    h.queue
        .request_cancel(&queued.id, Some("bob"), None)
        .await
        .unwrap();
    h.claim_exactly("w1", &running).await;
    let first = h
        .queue
        .request_cancel(&running.id, Some("bob"), Some("one".into()))
        .await
        .unwrap();
    let cancelled = h.get(&queued).await;

    h.advance(Duration::from_secs(5));
    let again = h
        .queue
        .request_cancel(&queued.id, Some("carol"), Some("x".into()))
        .await
        .unwrap();
    assert_eq!(again, cancelled);
    let again = h
        .queue
        .request_cancel(&running.id, Some("carol"), Some("two".into()))
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(again.cancel_reason.as_deref(), Some("one"));

    let count = |kinds: Vec<String>, kind: &str| kinds.iter().filter(|k| *k == kind).count();
    assert_eq!(
        count(h.event_kinds(&queued).await, events::JOB_CANCELLED),
        1
    );
    assert_eq!(
        count(h.event_kinds(&running).await, events::JOB_CANCEL_REQUESTED),
        1
    );
}

pub async fn repeated_ack_by_the_same_worker_is_a_no_op(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    let first = h.queue.ack_cancel(&job.id, &fence(&claimed)).await.unwrap();
    h.advance(Duration::from_secs(1));
    let second = h.queue.ack_cancel(&job.id, &fence(&claimed)).await.unwrap();
    assert_eq!(second, first);
    let cancels = h
        .event_kinds(&job)
        .await
        .into_iter()
        .filter(|k| k == events::JOB_CANCELLED)
        .count();
    assert_eq!(cancels, 1);
    // Anyone else acknowledging the finished job is refused.
    assert_conflict(
        h.queue.ack_cancel(&job.id, &Fence::new("w2", 1)).await,
        JobState::Cancelled,
    );
    assert_conflict(
        h.queue.ack_cancel(&job.id, &Fence::new("w1", 2)).await,
        JobState::Cancelled,
    );
}

pub async fn ack_without_a_cancel_request_is_a_state_conflict(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    assert_conflict(
        h.queue.ack_cancel(&job.id, &fence(&claimed)).await,
        JobState::Running,
    );
    assert_eq!(h.get(&job).await, claimed);
}

pub async fn ack_by_a_worker_without_the_lease_is_refused(h: Harness) {
    let queued = h.create(Spec::default()).await;
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &queued).await;
    h.claim_exactly("w1", &job).await;
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    assert_code(
        h.queue.ack_cancel(&job.id, &Fence::new("w2", 1)).await,
        "job_ownership_mismatch",
    );
    assert_code(
        h.queue.ack_cancel(&job.id, &Fence::new("w1", 2)).await,
        "job_ownership_mismatch",
    );
    assert_eq!(h.get(&job).await.status, JobState::Running);
    // A queued job belongs to nobody.
    let other = h.create(Spec::default()).await;
    assert_code(
        h.queue.ack_cancel(&other.id, &fence(&claimed)).await,
        "job_ownership_mismatch",
    );
}

pub async fn cancelling_a_finished_job_is_a_state_conflict(h: Harness) {
    let succeeded = h.create(Spec::default()).await;
    let failed = h.create(Spec::default()).await;
    let dead = h.create(Spec::attempts(1)).await;
    let c = h.claim_exactly("w1", &succeeded).await;
    h.queue.complete(&c.id, &fence(&c), None).await.unwrap();
    let c = h.claim_exactly("w1", &failed).await;
    h.queue
        .fail(&c.id, &fence(&c), "x".into(), false)
        .await
        .unwrap();
    let c = h.claim_exactly("w1", &dead).await;
    h.queue
        .fail(&c.id, &fence(&c), "x".into(), true)
        .await
        .unwrap();
    for (job, state) in [
        (&succeeded, JobState::Succeeded),
        (&failed, JobState::Failed),
        (&dead, JobState::DeadLetter),
    ] {
        assert_conflict(
            h.queue.request_cancel(&job.id, Some("bob"), None).await,
            state,
        );
        let after = h.get(job).await;
        assert_eq!(after.status, state);
        assert_eq!(after.cancel_requested_at, None);
    }
}

pub async fn late_cancel_keeps_the_actual_result(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .request_cancel(&job.id, Some("bob"), None)
        .await
        .unwrap();
    let done = h
        .queue
        .complete(&job.id, &fence(&claimed), Some("done anyway".into()))
        .await
        .unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert_eq!(done.cancel_requested_by_user_id.as_deref(), Some("bob"));
    let events = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, events::JOB_COMPLETED);
    assert_eq!(last.payload["cancelRequested"], true);
    assert_conflict(
        h.queue.request_cancel(&job.id, Some("bob"), None).await,
        JobState::Succeeded,
    );
    assert_conflict(
        h.queue.ack_cancel(&job.id, &fence(&claimed)).await,
        JobState::Succeeded,
    );
}

pub async fn failure_after_a_cancel_request_cancels_instead_of_retrying(h: Harness) {
    let job = h.create(Spec::attempts(3)).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .request_cancel(&job.id, Some("bob"), None)
        .await
        .unwrap();
    let failed = h
        .queue
        .fail(&job.id, &fence(&claimed), "killed".into(), true)
        .await
        .unwrap();
    assert_eq!(failed.status, JobState::Cancelled);
    assert_eq!(failed.claimed_by, None);
    assert_eq!(failed.error_message.as_deref(), Some("killed"));
    assert!(failed.finished_at.is_some());
    assert_eq!(
        h.event_kinds(&job).await.last().map(String::as_str),
        Some(events::JOB_CANCELLED)
    );
    h.advance(Duration::from_secs(3600));
    assert_eq!(h.claim("w1").await, None);
    // The worker that failed it may still acknowledge: its own call cancelled the job.
    let acked = h.queue.ack_cancel(&job.id, &fence(&claimed)).await.unwrap();
    assert_eq!(acked, failed);
}

pub async fn cancel_before_claim_makes_the_job_unclaimable(h: Harness) {
    let job = h.create(Spec::default()).await;
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    assert_eq!(h.claim("w1").await, None);
    assert_eq!(h.get(&job).await.status, JobState::Cancelled);
}

pub async fn claim_before_cancel_leaves_the_stop_to_the_worker(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let marked = h.queue.request_cancel(&job.id, None, None).await.unwrap();
    assert_eq!(marked.status, JobState::Running);
    assert_eq!(marked.attempt, claimed.attempt);
    assert!(marked.cancel_requested());
}

/// Both orders at once, many times: the outcome is always one of the two consistent ones.
pub async fn racing_cancel_and_claim_agree(h: Harness) {
    for _ in 0..20 {
        let job = h.create(Spec::default()).await;
        let (q1, q2) = (h.queue.clone(), h.queue.clone());
        let id = job.id;
        let cancel = tokio::spawn(async move { q1.request_cancel(&id, Some("bob"), None).await });
        let claim = tokio::spawn(async move { q2.claim(&request("w1")).await });
        let cancelled = cancel.await.unwrap().unwrap();
        let claimed = claim.await.unwrap().unwrap();
        let after = h.get(&job).await;
        match claimed {
            Some(claimed) => {
                assert_eq!(claimed.id, job.id);
                assert_eq!(after.status, JobState::Running);
                assert!(after.cancel_requested());
                assert_eq!(cancelled.status, JobState::Running);
                h.queue.ack_cancel(&job.id, &fence(&claimed)).await.unwrap();
            }
            None => {
                assert_eq!(after.status, JobState::Cancelled);
                assert_eq!(after.attempt, 0);
                assert_eq!(cancelled, after);
            }
        }
    }
}
