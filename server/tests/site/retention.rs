//! A job whose history retention deleted: its page says so, and its row is all that stays.

use std::time::Duration;

use axum::http::StatusCode;
use contract::NewEvent;
use contract::events::{StepLog, TaskEvent};
use contract::job::{events, task};
use queue::{Retention, RetentionConfig};
use serde_json::json;

use stepwise::testing::site::{claimed_job, get, session_cookie, test_site};

#[tokio::test]
async fn the_job_page_says_when_retention_deleted_the_history_and_shows_the_row() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let cookie = session_cookie(&queue).await;
    let raw = json!({ "payload": { "repository": "octo/repo", "task": {
        "instructions": "Keep nothing for long", "steps": [{ "instructions": "one" }],
    } } });
    let (job, fence) = claimed_job(&queue, &raw, "w1").await;
    let line = NewEvent {
        kind: task::STEP_LOG.into(),
        message: "a line of output".into(),
        payload: StepLog { step_index: 0 }.payload(),
        ..NewEvent::default()
    };
    queue.append_event(&job.id, &fence, line).await.unwrap();
    queue
        .add_artifact(
            &job.id,
            &fence,
            &task::step_log(0),
            "text/plain",
            b"a line of output\n",
        )
        .await
        .unwrap();
    queue
        .complete(&job.id, &fence, Some("all done".into()))
        .await
        .unwrap();
    let page = format!("/tasks/queue/{}", job.id);
    let (_, _, html) = get(&app, &cookie, &page).await;
    assert!(!html.contains("History"), "nothing was deleted yet");

    tokio::time::sleep(Duration::from_millis(5)).await;
    let keep_nothing = RetentionConfig {
        logs_after: Some(Duration::ZERO),
        history_after: Some(Duration::ZERO),
        walk_slack: Duration::ZERO,
        ..RetentionConfig::default()
    };
    let report = Retention::new(queue.clone(), keep_nothing)
        .run_once()
        .await
        .unwrap();
    assert_eq!(report.logs_compacted, [job.id]);
    assert_eq!(report.history_deleted, [job.id]);
    let kinds: Vec<_> = queue
        .list_events(&job.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, [events::JOB_HISTORY_DELETED]);

    let (status, _, html) = get(&app, &cookie, &page).await;
    assert_eq!(status, StatusCode::OK);
    for text in [
        "History",
        "were deleted at",
        "all done",
        "Keep nothing for long",
    ] {
        assert!(html.contains(text), "`{text}` is not on the job page");
    }
    let (status, _, list) = get(&app, &cookie, "/tasks/queue").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        list.contains(&job.id.to_string()),
        "the row stays in the list"
    );
}
