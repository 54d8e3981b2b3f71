use serde_json::json;

use super::*;

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap_or_default()
}

fn running(attempt: u32, max: u32) -> Job {
    Job {
        status: JobState::Running,
        attempt,
        max_attempts: max,
        claimed_by: Some("w".into()),
        lease_expires_at: Some(at(10)),
        started_at: Some(at(0)),
        ..Job::queued(uuid::Uuid::nil().into(), json!({}), at(0))
    }
}

fn fence(attempt: u32) -> Fence {
    Fence {
        worker_id: "w".into(),
        attempt,
    }
}

fn retry() -> Retry {
    Retry {
        at: at(100),
        delay_ms: 2000,
    }
}

fn kinds(outcome: &Outcome) -> Vec<&str> {
    match outcome {
        Outcome::Changed { events, .. } => events.iter().map(|e| e.kind.as_str()).collect(),
        _ => vec![],
    }
}

#[test]
fn fence_of_an_older_attempt_is_an_ownership_mismatch() {
    let job = running(2, 3);
    let err = check_fence(&job, &fence(1)).unwrap_err();
    assert_eq!(err.code().as_str(), "job_ownership_mismatch");
    let err = check_fence(
        &job,
        &Fence {
            worker_id: "x".into(),
            attempt: 2,
        },
    )
    .unwrap_err();
    assert_eq!(err.code().as_str(), "job_ownership_mismatch");
    assert!(check_fence(&job, &fence(2)).is_ok());
}

#[test]
fn lease_expiry_ignores_a_lease_renewed_since_it_was_seen() {
    let mut job = running(1, 3);
    assert_eq!(
        expire_lease(&mut job, at(10), retry(), None).unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(job.status, JobState::Running);
    let outcome = expire_lease(&mut job, at(11), retry(), None).unwrap();
    assert_eq!(
        kinds(&outcome),
        [events::JOB_LEASE_EXPIRED, events::JOB_RETRY_SCHEDULED]
    );
    assert_eq!(job.status, JobState::Queued);
    assert_eq!(job.attempt, 1);
    assert_eq!(job.next_attempt_at, at(100));
}

#[test]
fn cancelled_event_fence_round_trips() {
    let outcome = {
        let mut job = running(2, 3);
        job.cancel_requested_at = Some(at(1));
        ack_cancel(&mut job, &fence(2), at(2), None).unwrap()
    };
    let Outcome::Changed { events, .. } = outcome else {
        panic!("ack must change the job");
    };
    assert_eq!(acknowledged_by(&events[0].payload), Some(fence(2)));
}

/// Every event every transition writes, kind, message and payload, exactly: what clients
/// read of the queue's own events must not move when the code that builds them does.
#[test]
fn every_transition_writes_its_events_exactly() {
    fn written(outcome: Result<Outcome, QueueError>) -> Vec<(String, String, Value)> {
        match outcome.unwrap() {
            Outcome::Changed { events, .. } => events
                .into_iter()
                .map(|e| (e.kind, e.message, Value::Object(e.payload)))
                .collect(),
            other => panic!("no change: {other:?}"),
        }
    }
    fn one(kind: &str, message: &str, payload: Value) -> Vec<(String, String, Value)> {
        vec![(kind.into(), message.into(), payload)]
    }
    let asked = |mut job: Job| {
        job.cancel_requested_at = Some(at(1));
        job.cancel_requested_by_user_id = Some("bob".into());
        job.cancel_reason = Some("wrong repo".into());
        job
    };

    let mut job = Job {
        priority: 5,
        required_capabilities: vec!["codex".into()],
        created_by_user_id: Some("ann".into()),
        ..Job::queued(uuid::Uuid::nil().into(), json!({}), at(0))
    };
    let created = created_event(&job);
    assert_eq!(
        (
            created.kind.as_str(),
            created.message.as_str(),
            Value::Object(created.payload)
        ),
        (
            events::JOB_CREATED,
            "queued",
            json!({ "priority": 5, "maxAttempts": 3, "requiredCapabilities": ["codex"],
                    "createdByUserId": "ann" })
        )
    );
    claim(&mut job, "w", at(0), at(10));
    let claimed = claimed_event(&job, job.lease_expires_at);
    assert_eq!(
        (claimed.message.as_str(), Value::Object(claimed.payload)),
        (
            "claimed by w (attempt 1 of 3)",
            json!({ "workerId": "w", "attempt": 1, "leaseExpiresAt": at(10) })
        )
    );

    assert_eq!(
        written(complete(
            &mut running(1, 3),
            &fence(1),
            at(5),
            Some("done".into())
        )),
        one(
            events::JOB_COMPLETED,
            "succeeded",
            json!({ "workerId": "w", "attempt": 1, "cancelRequested": false, "resultSummary": "done" })
        )
    );
    assert_eq!(
        written(complete(&mut asked(running(1, 3)), &fence(1), at(5), None)),
        one(
            events::JOB_COMPLETED,
            "succeeded; the cancel request came too late to stop it",
            json!({ "workerId": "w", "attempt": 1, "cancelRequested": true, "resultSummary": null })
        )
    );

    let failure = json!({ "workerId": "w", "attempt": 1, "error": "boom", "retryable": true });
    assert_eq!(
        written(fail(
            &mut running(1, 3),
            &fence(1),
            at(5),
            "boom".into(),
            true,
            retry()
        )),
        one(
            events::JOB_RETRY_SCHEDULED,
            "retry scheduled: attempt 2 of 3 in 2000 ms",
            json!({ "workerId": "w", "attempt": 1, "error": "boom", "retryable": true,
                    "nextAttemptAt": at(100), "delayMs": 2000 })
        )
    );
    assert_eq!(
        written(fail(
            &mut running(1, 3),
            &fence(1),
            at(5),
            "boom".into(),
            false,
            retry()
        )),
        one(
            events::JOB_FAILED,
            "failed on attempt 1",
            json!({ "workerId": "w", "attempt": 1, "error": "boom", "retryable": false })
        )
    );
    assert_eq!(
        written(fail(
            &mut running(1, 1),
            &fence(1),
            at(5),
            "boom".into(),
            true,
            retry()
        )),
        one(
            events::JOB_DEAD_LETTERED,
            "dead-lettered: attempt 1 of 1 failed",
            failure.clone()
        )
    );
    assert_eq!(
        written(fail(
            &mut asked(running(1, 3)),
            &fence(1),
            at(5),
            "boom".into(),
            true,
            retry()
        )),
        one(
            events::JOB_CANCELLED,
            "cancelled: the worker failed after the cancel was requested",
            json!({ "workerId": "w", "attempt": 1, "error": "boom", "retryable": true,
                    "reason": "wrong repo", "by": "worker" })
        )
    );

    let queued = Job::queued(uuid::Uuid::nil().into(), json!({}), at(0));
    assert_eq!(
        written(request_cancel(
            &mut queued.clone(),
            Some("bob"),
            None,
            at(5)
        )),
        one(
            events::JOB_CANCELLED,
            "cancelled before any worker claimed it",
            json!({ "requestedBy": "bob", "reason": null, "by": "user" })
        )
    );
    assert_eq!(
        written(request_cancel(
            &mut running(1, 3),
            None,
            Some("why".into()),
            at(5)
        )),
        one(
            events::JOB_CANCEL_REQUESTED,
            "cancel requested; waiting for the worker to stop",
            json!({ "requestedBy": null, "reason": "why" })
        )
    );
    assert_eq!(
        written(ack_cancel(
            &mut asked(running(2, 3)),
            &fence(2),
            at(5),
            None
        )),
        one(
            events::JOB_CANCELLED,
            "cancelled: the worker stopped and acknowledged",
            json!({ "workerId": "w", "attempt": 2, "requestedBy": "bob", "reason": "wrong repo",
                    "by": "worker" })
        )
    );

    let expired = json!({ "workerId": "w", "attempt": 1, "leaseExpiresAt": at(10) });
    let lease_expired = (
        events::JOB_LEASE_EXPIRED.to_string(),
        "lease of w expired on attempt 1".to_string(),
        expired.clone(),
    );
    assert_eq!(
        written(expire_lease(&mut running(1, 3), at(11), retry(), None)),
        vec![
            lease_expired.clone(),
            (
                events::JOB_RETRY_SCHEDULED.into(),
                "retry scheduled: attempt 2 of 3 in 2000 ms".into(),
                json!({ "workerId": "w", "attempt": 1, "leaseExpiresAt": at(10),
                        "nextAttemptAt": at(100), "delayMs": 2000 })
            )
        ]
    );
    assert_eq!(
        written(expire_lease(&mut running(1, 1), at(11), retry(), None)),
        vec![
            lease_expired.clone(),
            (
                events::JOB_DEAD_LETTERED.into(),
                "dead-lettered: the lease expired on attempt 1 of 1".into(),
                expired
            )
        ]
    );
    assert_eq!(
        written(expire_lease(
            &mut asked(running(1, 3)),
            at(11),
            retry(),
            None
        )),
        vec![
            lease_expired,
            (
                events::JOB_CANCELLED.into(),
                "cancelled: the lease expired after the cancel was requested".into(),
                json!({ "workerId": "w", "attempt": 1, "leaseExpiresAt": at(10),
                        "reason": "wrong repo", "by": "rescuer" })
            )
        ]
    );
}
