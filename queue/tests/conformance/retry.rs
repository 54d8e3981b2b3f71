//! Failures: retry with backoff, dead letter, permanent failure.

use std::time::Duration;

use contract::JobState;
use contract::job::events;

use crate::harness::*;

pub async fn retryable_failure_requeues_after_exponential_backoff(h: Harness) {
    let job = h.create(Spec::attempts(3)).await;
    let first = h.claim_exactly("w1", &job).await;
    h.advance(Duration::from_secs(10));
    let failed_at = start_time() + Duration::from_secs(10);
    let requeued = h
        .queue
        .fail(&job.id, &fence(&first), "network down".into(), true)
        .await
        .unwrap();
    assert_eq!(requeued.status, JobState::Queued);
    assert_eq!(requeued.attempt, 1);
    assert_eq!(requeued.claimed_by, None);
    assert_eq!(requeued.lease_expires_at, None);
    assert_eq!(requeued.finished_at, None);
    assert_eq!(requeued.error_message.as_deref(), Some("network down"));
    assert_eq!(requeued.next_attempt_at, failed_at + Duration::from_secs(2));
    let events = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    let retry = events.last().unwrap();
    assert_eq!(retry.kind, events::JOB_RETRY_SCHEDULED);
    assert_eq!(retry.payload["delayMs"], 2000);
    assert_eq!(retry.payload["error"], "network down");

    // Not before the window has elapsed, to the millisecond.
    assert_eq!(h.claim("w2").await, None);
    h.advance(Duration::from_millis(1999));
    assert_eq!(h.claim("w2").await, None);
    h.advance(Duration::from_millis(1));
    let second = h.claim_exactly("w2", &job).await;
    assert_eq!(second.attempt, 2);
    assert_eq!(second.started_at, first.started_at);

    h.advance(Duration::from_secs(1));
    let again = h
        .queue
        .fail(&job.id, &fence(&second), "still down".into(), true)
        .await
        .unwrap();
    assert_eq!(
        again.next_attempt_at,
        failed_at + Duration::from_secs(2 + 1) + Duration::from_secs(4)
    );
}

pub async fn backoff_is_capped(h: Harness) {
    let queue = h
        .queue_with(|c| {
            c.retry_base = Duration::from_secs(100);
            c.retry_cap = Duration::from_secs(300);
        })
        .await;
    let job = queue
        .create_job(&Spec::attempts(10).json(), None)
        .await
        .unwrap();
    let mut delays = Vec::new();
    for _ in 0..4 {
        h.advance(Duration::from_secs(3600));
        let claimed = queue.claim(&request("w1")).await.unwrap().unwrap();
        let failed = queue
            .fail(&job.id, &fence(&claimed), "flaky".into(), true)
            .await
            .unwrap();
        delays.push((failed.next_attempt_at - failed.updated_at).num_seconds());
    }
    assert_eq!(delays, [100, 200, 300, 300]);
}

pub async fn retryable_failure_on_the_last_attempt_dead_letters(h: Harness) {
    let job = h.create(Spec::attempts(2)).await;
    let first = h.claim_exactly("w1", &job).await;
    h.queue
        .fail(&job.id, &fence(&first), "flaky".into(), true)
        .await
        .unwrap();
    h.advance(Duration::from_secs(2));
    let second = h.claim_exactly("w1", &job).await;
    let dead = h
        .queue
        .fail(&job.id, &fence(&second), "flaky again".into(), true)
        .await
        .unwrap();
    assert_eq!(dead.status, JobState::DeadLetter);
    assert_eq!(dead.attempt, 2);
    assert_eq!(dead.error_message.as_deref(), Some("flaky again"));
    assert_eq!(
        dead.finished_at,
        Some(start_time() + Duration::from_secs(2))
    );
    assert_eq!(dead.lease_expires_at, None);
    assert_eq!(
        h.event_kinds(&job).await.last().map(String::as_str),
        Some(events::JOB_DEAD_LETTERED)
    );
    h.advance(Duration::from_secs(3600));
    assert_eq!(h.claim("w1").await, None);
}

pub async fn non_retryable_failure_fails_the_job(h: Harness) {
    let job = h.create(Spec::attempts(3)).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let failed = h
        .queue
        .fail(&job.id, &fence(&claimed), "bad instructions".into(), false)
        .await
        .unwrap();
    assert_eq!(failed.status, JobState::Failed);
    assert_eq!(failed.attempt, 1);
    assert_eq!(failed.error_message.as_deref(), Some("bad instructions"));
    assert_eq!(failed.finished_at, Some(start_time()));
    assert_eq!(failed.claimed_by.as_deref(), Some("w1"));
    assert_eq!(h.get(&job).await, failed);
    let events = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, events::JOB_FAILED);
    assert_eq!(last.level, contract::EventLevel::Error);
    h.advance(Duration::from_secs(3600));
    assert_eq!(h.claim("w1").await, None);
}
