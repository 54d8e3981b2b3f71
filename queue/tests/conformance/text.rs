//! Text both backends must treat alike: PostgreSQL cannot store U+0000, SQLite can, so the
//! queue refuses it where someone typed it and replaces it where an agent printed it
//! (`contract::text`), and neither backend ever sees one.

use contract::EventLevel;
use contract::text::NUL_MESSAGE;
use queue::{JobFilter, NewToken, QueueError, TokenKind};
use serde_json::json;

use crate::harness::*;

/// The one field error of an `Invalid`, as `(path, message)`.
#[track_caller]
fn invalid_field<T: std::fmt::Debug>(result: Result<T, QueueError>) -> (String, String) {
    match assert_code(result, "invalid_queue_payload") {
        QueueError::Invalid(errors) => {
            assert_eq!(errors.len(), 1, "{errors:?}");
            (errors[0].path.clone(), errors[0].message.clone())
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

pub async fn a_nul_typed_into_a_task_is_refused_at_its_field(h: Harness) {
    let mut raw = Spec::default().json();
    raw["payload"]["task"]["instructions"] = json!("Fix\u{0}it");
    raw["payload"]["task"]["steps"] = json!([{ "title": "ok", "instructions": "a\u{0}b" }]);
    raw["payload"]["task"]["skill"] = json!({ "id": "auto", "args": { "k\u{0}": ["\u{0}"] } });
    let err = h.queue.create_job(&raw, Some("alice")).await.unwrap_err();
    let QueueError::Invalid(errors) = err else {
        panic!("expected Invalid, got {err:?}")
    };
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"task.instructions"), "{errors:?}");
    assert!(paths.contains(&"task.steps[0].instructions"), "{errors:?}");
    assert!(
        paths.iter().any(|p| p.starts_with("task.skill.args")),
        "{errors:?}"
    );
    assert!(
        errors.iter().all(|e| e.message == NUL_MESSAGE),
        "{errors:?}"
    );
    let listed = h.queue.list_jobs(&JobFilter::default()).await.unwrap();
    assert!(listed.jobs.is_empty(), "nothing is stored");
}

pub async fn a_nul_in_a_cancel_reason_or_a_filter_is_refused(h: Harness) {
    let job = h.create(Spec::default()).await;
    let (path, message) = invalid_field(
        h.queue
            .request_cancel(&job.id, Some("alice"), Some("because\u{0}".into()))
            .await,
    );
    assert_eq!((path.as_str(), message.as_str()), ("reason", NUL_MESSAGE));
    assert_eq!(h.get(&job).await.status, contract::JobState::Queued);
    let too_long = "x".repeat(contract::limits::CANCEL_REASON_CHARS + 1);
    let (path, _) = invalid_field(
        h.queue
            .request_cancel(&job.id, Some("alice"), Some(too_long))
            .await,
    );
    assert_eq!(path, "reason");
    let filter = JobFilter {
        job_type: Some("task\u{0}".into()),
        ..JobFilter::default()
    };
    let (path, _) = invalid_field(h.queue.list_jobs(&filter).await);
    assert_eq!(path, "type");
}

pub async fn a_nul_in_what_a_worker_offers_is_refused(h: Harness) {
    let mut request = request("w1");
    request.capabilities.push("gi\u{0}t".into());
    let (path, _) = invalid_field(h.queue.claim(&request).await);
    assert_eq!(path, format!("capabilities[{}]", ALL_CAPS.len()));
    let sighting = queue::Sighting {
        version: Some("v\u{0}1"),
        ..queue::Sighting::default()
    };
    let (path, _) = invalid_field(h.queue.worker_seen("w1", &sighting).await);
    assert_eq!(path, "workerVersion");
    let sighting = queue::Sighting {
        sandbox: Some("bw\u{0}rap"),
        ..queue::Sighting::default()
    };
    let (path, _) = invalid_field(h.queue.worker_seen("w1", &sighting).await);
    assert_eq!(path, "sandbox");
    let token = NewToken {
        name: "bad\u{0}name".into(),
        kind: TokenKind::Worker,
        role: None,
        token_hash: "a".repeat(64),
        token_prefix: "sww_0123".into(),
        capabilities: Some(vec!["co\u{0}dex".into()]),
        allowed_repositories: None,
        allowed_job_types: None,
    };
    let err = h.queue.create_token(token).await.unwrap_err();
    let QueueError::Invalid(errors) = err else {
        panic!("expected Invalid, got {err:?}")
    };
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["name", "capabilities[0]"]);
}

pub async fn a_nul_an_agent_printed_is_stored_replaced(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    let mut payload = serde_json::Map::new();
    payload.insert("k\u{0}ey".into(), json!(["v\u{0}"]));
    let event = h
        .queue
        .append_event(
            &job.id,
            &f,
            contract::NewEvent {
                kind: "task.step.log".into(),
                level: EventLevel::Info,
                message: "line\u{0}end".into(),
                payload,
            },
        )
        .await
        .unwrap();
    assert_eq!(event.message, "line\u{FFFD}end");
    assert_eq!(
        json!(event.payload),
        json!({ "k\u{FFFD}ey": ["v\u{FFFD}"] })
    );
    let stored = h.queue.list_events(&job.id, 0, 1000).await.unwrap();
    assert_eq!(stored.last().unwrap(), &event, "stored as answered");
    let failed = h
        .queue
        .fail(&job.id, &f, "boom\u{0}".into(), false)
        .await
        .unwrap();
    assert_eq!(failed.error_message.as_deref(), Some("boom\u{FFFD}"));
    assert_eq!(h.get(&job).await.error_message, failed.error_message);

    let other = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &other).await;
    let done = h
        .queue
        .complete(&other.id, &fence(&claimed), Some("did\u{0}it".into()))
        .await
        .unwrap();
    assert_eq!(done.result_summary.as_deref(), Some("did\u{FFFD}it"));
    assert_eq!(h.get(&other).await.result_summary, done.result_summary);
}

pub async fn reported_text_past_its_limit_is_refused_whole(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    let long = "e".repeat(contract::limits::REPORTED_TEXT_BYTES + 1);
    let err = h.queue.fail(&job.id, &f, long, false).await.unwrap_err();
    assert_eq!(err.code().as_str(), "payload_too_large", "{err}");
    assert_eq!(h.get(&job).await.status, contract::JobState::Running);
    let err = h
        .queue
        .complete(
            &job.id,
            &f,
            Some("s".repeat(contract::limits::REPORTED_TEXT_BYTES + 1)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code().as_str(), "payload_too_large", "{err}");
}
