//! The lease rescuer: requeue, cancel or dead-letter jobs whose worker went silent.

use std::time::Duration;

use contract::JobState;
use contract::job::events;
use queue::{RescueReport, Rescuer, RescuerConfig};
use tokio_util::sync::CancellationToken;

use crate::harness::*;

fn rescuer(h: &Harness) -> Rescuer {
    Rescuer::new(h.queue.clone(), RescuerConfig::default())
}

pub async fn expired_lease_is_requeued_with_the_attempt_kept(h: Harness) {
    let job = h.create(Spec::attempts(3)).await;
    h.claim_exactly("w1", &job).await;
    h.advance(LEASE);
    assert_eq!(
        rescuer(&h).run_once().await.unwrap(),
        RescueReport::default()
    );
    h.advance(Duration::from_millis(1));
    let now = start_time() + LEASE + Duration::from_millis(1);
    let report = rescuer(&h).run_once().await.unwrap();
    assert_eq!(
        report,
        RescueReport {
            requeued: vec![job.id],
            ..RescueReport::default()
        }
    );
    let after = h.get(&job).await;
    assert_eq!(after.status, JobState::Queued);
    assert_eq!(after.attempt, 1);
    assert_eq!(after.claimed_by, None);
    assert_eq!(after.lease_expires_at, None);
    assert_eq!(after.next_attempt_at, now + Duration::from_secs(2));
    let kinds = h.event_kinds(&job).await;
    assert_eq!(
        kinds[2..],
        [events::JOB_LEASE_EXPIRED, events::JOB_RETRY_SCHEDULED]
    );
    h.advance(Duration::from_secs(2));
    assert_eq!(h.claim_exactly("w2", &job).await.attempt, 2);
    assert_eq!(rescuer(&h).run_once().await.unwrap().total(), 0);
}

pub async fn expired_lease_with_a_cancel_request_is_cancelled(h: Harness) {
    let job = h.create(Spec::attempts(3)).await;
    h.claim_exactly("w1", &job).await;
    h.queue
        .request_cancel(&job.id, Some("bob"), None)
        .await
        .unwrap();
    h.advance(LEASE + Duration::from_secs(1));
    let report = rescuer(&h).run_once().await.unwrap();
    assert_eq!(report.cancelled, [job.id]);
    assert_eq!(report.total(), 1);
    let after = h.get(&job).await;
    assert_eq!(after.status, JobState::Cancelled);
    assert_eq!(after.claimed_by, None);
    assert_eq!(
        after.finished_at,
        Some(start_time() + LEASE + Duration::from_secs(1))
    );
    let kinds = h.event_kinds(&job).await;
    assert_eq!(
        kinds[kinds.len() - 2..],
        [events::JOB_LEASE_EXPIRED, events::JOB_CANCELLED]
    );
    h.advance(Duration::from_secs(3600));
    assert_eq!(h.claim("w2").await, None);
}

pub async fn expired_lease_on_the_last_attempt_dead_letters(h: Harness) {
    let job = h.create(Spec::attempts(1)).await;
    h.claim_exactly("w1", &job).await;
    h.advance(LEASE + Duration::from_secs(1));
    let report = rescuer(&h).run_once().await.unwrap();
    assert_eq!(report.dead_lettered, [job.id]);
    let after = h.get(&job).await;
    assert_eq!(after.status, JobState::DeadLetter);
    assert_eq!(after.attempt, 1);
    assert!(
        after
            .error_message
            .as_deref()
            .unwrap()
            .contains("lease expired")
    );
    assert!(after.finished_at.is_some());
    assert_eq!(
        h.event_kinds(&job).await.last().map(String::as_str),
        Some(events::JOB_DEAD_LETTERED)
    );
}

pub async fn heartbeating_job_is_never_rescued(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    for _ in 0..5 {
        h.advance(LEASE - Duration::from_secs(1));
        h.queue
            .heartbeat(&job.id, &fence(&claimed), LEASE)
            .await
            .unwrap();
        assert_eq!(rescuer(&h).run_once().await.unwrap().total(), 0);
    }
    assert_eq!(h.get(&job).await.status, JobState::Running);
}

pub async fn rescuer_handles_more_jobs_than_one_batch(h: Harness) {
    let mut ids = Vec::new();
    for _ in 0..5 {
        let job = h.create(Spec::default()).await;
        h.claim_exactly("w1", &job).await;
        ids.push(job.id);
    }
    h.advance(LEASE + Duration::from_secs(1));
    let small = Rescuer::new(
        h.queue.clone(),
        RescuerConfig {
            batch_size: 2,
            ..RescuerConfig::default()
        },
    );
    let mut report = small.run_once().await.unwrap();
    report.requeued.sort();
    ids.sort();
    assert_eq!(report.requeued, ids);
}

pub async fn rescuer_runs_in_the_background_until_stopped(h: Harness) {
    let job = h.create(Spec::default()).await;
    h.claim_exactly("w1", &job).await;
    h.advance(LEASE + Duration::from_secs(1));
    let stop = CancellationToken::new();
    let handle = Rescuer::new(
        h.queue.clone(),
        RescuerConfig {
            interval: Duration::from_millis(20),
            ..RescuerConfig::default()
        },
    )
    .start(stop.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while h.get(&job).await.status != JobState::Queued {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not rescued in time"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the rescuer stops when cancelled")
        .unwrap();
}
