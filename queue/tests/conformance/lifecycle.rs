//! Creating, reading, claiming, heartbeating and completing a job.

use std::time::Duration;

use contract::JobState;
use contract::job::events;
use queue::Fence;
use serde_json::json;

use crate::harness::*;

pub async fn created_job_is_queued_with_normalized_fields(h: Harness) {
    let job = h.create(Spec::priority(7)).await;
    assert_eq!(job.status, JobState::Queued);
    assert_eq!(job.job_type, "task");
    assert_eq!(job.priority, 7);
    assert_eq!(job.max_attempts, 3);
    assert_eq!(job.attempt, 0);
    assert_eq!(job.required_capabilities, ["codex", "git"]);
    assert_eq!(job.payload["repository"], "octo/repo");
    assert_eq!(job.payload["task"]["publish"]["mode"], "none");
    assert_eq!(job.created_by_user_id.as_deref(), Some("alice"));
    assert_eq!(job.created_at, start_time());
    assert_eq!(job.next_attempt_at, start_time());
    assert_eq!(job.claimed_by, None);
    assert_eq!(job.lease_expires_at, None);
    assert_eq!(job.started_at, None);
    assert_eq!(job.finished_at, None);
    assert_eq!(job.id.uuid().get_version_num(), 7);
    assert_eq!(h.get(&job).await, job);
    assert_eq!(h.event_kinds(&job).await, [events::JOB_CREATED]);
}

pub async fn seed_example_payload_is_stored_as_normalized(h: Harness) {
    let raw: serde_json::Value = serde_json::from_str(include_str!("seed_example.json")).unwrap();
    let job = h.queue.create_job(&raw, None).await.unwrap();
    let expected = contract::normalize(&raw, &contract::Defaults::default()).unwrap();
    assert_eq!(
        *job.payload,
        serde_json::to_value(&expected.payload).unwrap()
    );
    assert_eq!(h.get(&job).await.payload, job.payload);
    assert_eq!(job.created_by_user_id, None);
}

pub async fn invalid_task_is_refused_with_field_errors(h: Harness) {
    let raw = json!({ "payload": { "repository": "octo/repo", "task": {} }, "priority": 5000 });
    let err = assert_code(
        h.queue.create_job(&raw, None).await,
        "invalid_queue_payload",
    );
    let queue::QueueError::Invalid(errors) = err else {
        panic!("expected field errors");
    };
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"priority"), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with("task")), "{paths:?}");
    let page = h.queue.list_jobs(&Default::default()).await.unwrap();
    assert!(page.jobs.is_empty());
}

pub async fn claim_leases_the_job_and_records_the_claim(h: Harness) {
    let job = h.create(Spec::default()).await;
    h.advance(Duration::from_secs(5));
    let claimed = h.claim_exactly("w1", &job).await;
    let now = start_time() + Duration::from_secs(5);
    assert_eq!(claimed.status, JobState::Running);
    assert_eq!(claimed.claimed_by.as_deref(), Some("w1"));
    assert_eq!(claimed.attempt, 1);
    assert_eq!(claimed.lease_expires_at, Some(now + LEASE));
    assert_eq!(claimed.started_at, Some(now));
    assert_eq!(claimed.updated_at, now);
    assert_eq!(h.get(&job).await, claimed);
    let events = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    assert_eq!(events[1].kind, events::JOB_CLAIMED);
    // Exactly, field for field: PostgreSQL writes this event in SQL, SQLite from Rust.
    assert_eq!(events[1].level, contract::EventLevel::Info);
    assert_eq!(events[1].message, "claimed by w1 (attempt 1 of 3)");
    assert_eq!(
        serde_json::Value::Object(events[1].payload.clone()),
        serde_json::json!({
            "workerId": "w1",
            "attempt": 1,
            "leaseExpiresAt": now + LEASE,
        })
    );
    assert_eq!(events[1].created_at, now);
}

/// PostgreSQL fills the claimed row's attempt into templates of the event; a worker id full
/// of what templates and JSON treat specially must still come out as written.
pub async fn a_claim_event_names_a_worker_of_any_text_verbatim(h: Harness) {
    let worker = r#"w%s %1$s 100% "q" \ é"#;
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly(worker, &job).await;
    let events = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    assert_eq!(
        events[1].message,
        format!("claimed by {worker} (attempt 1 of 3)")
    );
    assert_eq!(
        serde_json::Value::Object(events[1].payload.clone()),
        serde_json::json!({
            "workerId": worker,
            "attempt": 1,
            "leaseExpiresAt": claimed.lease_expires_at,
        })
    );
}

pub async fn heartbeat_extends_the_lease_without_an_event(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.advance(Duration::from_secs(20));
    let beat = h
        .queue
        .heartbeat(&job.id, &fence(&claimed), Duration::from_secs(60))
        .await
        .unwrap();
    let now = start_time() + Duration::from_secs(20);
    assert_eq!(beat.lease_expires_at, Some(now + Duration::from_secs(60)));
    assert_eq!(beat.status, JobState::Running);
    assert_eq!(beat.cancel_requested_at, None);
    assert_eq!(h.get(&job).await, beat);
    assert_eq!(
        h.event_kinds(&job).await,
        [events::JOB_CREATED, events::JOB_CLAIMED]
    );
}

pub async fn complete_finishes_the_job(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.advance(Duration::from_secs(90));
    let done = h
        .queue
        .complete(&job.id, &fence(&claimed), Some("all green".into()))
        .await
        .unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert_eq!(done.result_summary.as_deref(), Some("all green"));
    assert_eq!(
        done.finished_at,
        Some(start_time() + Duration::from_secs(90))
    );
    assert_eq!(done.lease_expires_at, None);
    assert_eq!(done.claimed_by.as_deref(), Some("w1"));
    assert_eq!(done.attempt, 1);
    assert_eq!(h.get(&job).await, done);
    assert_eq!(
        h.event_kinds(&job).await,
        [
            events::JOB_CREATED,
            events::JOB_CLAIMED,
            events::JOB_COMPLETED
        ]
    );
    assert!(h.claim("w2").await.is_none());
}

pub async fn repeated_complete_by_the_same_worker_is_a_no_op(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let first = h
        .queue
        .complete(&job.id, &fence(&claimed), None)
        .await
        .unwrap();
    h.advance(Duration::from_secs(1));
    let second = h
        .queue
        .complete(&job.id, &fence(&claimed), Some("again".into()))
        .await
        .unwrap();
    assert_eq!(second, first);
    let completions = h
        .event_kinds(&job)
        .await
        .into_iter()
        .filter(|k| k == events::JOB_COMPLETED)
        .count();
    assert_eq!(completions, 1);
    // Another worker completing the finished job is refused.
    assert_conflict(
        h.queue.complete(&job.id, &Fence::new("w2", 1), None).await,
        JobState::Succeeded,
    );
}

pub async fn finished_job_refuses_worker_writes_with_a_state_conflict(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    h.queue.complete(&job.id, &f, None).await.unwrap();
    assert_conflict(
        h.queue.heartbeat(&job.id, &f, LEASE).await,
        JobState::Succeeded,
    );
    assert_conflict(
        h.queue.fail(&job.id, &f, "late".into(), true).await,
        JobState::Succeeded,
    );
    assert_conflict(h.queue.ack_cancel(&job.id, &f).await, JobState::Succeeded);
    assert_conflict(
        h.queue
            .append_event(&job.id, &f, step_event("task.step.started"))
            .await,
        JobState::Succeeded,
    );
    assert_eq!(h.get(&job).await.status, JobState::Succeeded);
}

pub async fn unknown_job_is_not_found_everywhere(h: Harness) {
    let f = Fence::new("w1", 1);
    // Text that is not a job id never reaches the queue: the edges parse it into a
    // `JobId` and answer job_not_found themselves (`QueueError::from(ParseJobIdError)`).
    {
        let id = &uuid::Uuid::now_v7().into();
        assert_code(h.queue.get_job(id).await, "job_not_found");
        assert_code(h.queue.heartbeat(id, &f, LEASE).await, "job_not_found");
        assert_code(h.queue.complete(id, &f, None).await, "job_not_found");
        assert_code(
            h.queue.fail(id, &f, "x".into(), true).await,
            "job_not_found",
        );
        assert_code(
            h.queue.request_cancel(id, None, None).await,
            "job_not_found",
        );
        assert_code(h.queue.ack_cancel(id, &f).await, "job_not_found");
        assert_code(
            h.queue
                .append_event(id, &f, step_event("task.step.started"))
                .await,
            "job_not_found",
        );
        assert_code(h.queue.list_events(id, 0, 10).await, "job_not_found");
        assert_code(
            h.queue
                .add_artifact(id, &f, "a.log", "text/plain", b"x")
                .await,
            "job_not_found",
        );
        assert_code(h.queue.list_artifacts(id).await, "job_not_found");
    }
}

pub async fn migrating_again_changes_nothing(h: Harness) {
    let job = h.create(Spec::default()).await;
    h.queue.migrate().await.unwrap();
    assert_eq!(h.get(&job).await, job);
}
