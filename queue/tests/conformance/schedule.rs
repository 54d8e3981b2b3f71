//! A scheduled start (`notBefore`): the job waits queued, unclaimable, until its time.

use std::time::Duration;

use contract::JobState;

use crate::harness::*;

pub async fn a_scheduled_job_is_not_claimed_before_its_time(h: Harness) {
    let at = start_time() + chrono::Duration::hours(2);
    let mut raw = Spec::default().json();
    raw["notBefore"] = at.to_rfc3339().into();
    let job = h.queue.create_job(&raw, Some("alice")).await.unwrap();
    assert_eq!(job.status, JobState::Queued);
    assert_eq!(job.next_attempt_at, at);
    assert_eq!(h.get(&job).await.next_attempt_at, at);
    // A job queued after it but due now is claimed first; the scheduled one waits.
    let now = h.create(Spec::default()).await;
    h.claim_exactly("w1", &now).await;
    assert!(h.claim("w1").await.is_none(), "claimed before its time");
    h.advance(Duration::from_secs(2 * 3600 - 1));
    assert!(h.claim("w1").await.is_none(), "claimed a second early");
    h.advance(Duration::from_secs(1));
    h.claim_exactly("w1", &job).await;
    // Its creation said when it would start.
    let created = &h.queue.list_events(&job.id, 0, 10).await.unwrap()[0];
    assert_eq!(created.kind, "job.created");
    assert_eq!(created.payload["notBefore"], serde_json::json!(at));
    assert!(
        created.message.starts_with("queued, to start at "),
        "{}",
        created.message
    );
}

pub async fn a_start_in_the_past_runs_at_once_and_a_bad_one_is_named(h: Harness) {
    let mut raw = Spec::default().json();
    raw["notBefore"] = (start_time() - chrono::Duration::hours(1))
        .to_rfc3339()
        .into();
    let past = h.queue.create_job(&raw, None).await.unwrap();
    assert_eq!(past.next_attempt_at, start_time());
    h.claim_exactly("w1", &past).await;

    raw["notBefore"] = "next tuesday".into();
    raw["priority"] = "high".into();
    let refused = assert_code(
        h.queue.create_job(&raw, None).await,
        "invalid_queue_payload",
    );
    let queue::QueueError::Invalid(errors) = refused else {
        panic!("{refused:?}")
    };
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["priority", "notBefore"], "every problem at once");
}
