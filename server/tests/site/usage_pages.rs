//! The job page and the jobs list show what a job's steps used: each step's figures, the
//! job's total, and the total in brief on the list.

use axum::http::StatusCode;
use contract::NewEvent;
use contract::job::task;
use serde_json::json;

use stepwise::testing::site::{claimed_job, get, session_cookie, test_site};

#[tokio::test]
async fn the_job_page_and_the_list_show_each_steps_usage_and_the_jobs_total() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let cookie = session_cookie(&queue).await;
    let raw = json!({ "payload": { "repository": "octo/repo", "task": {
        "instructions": "Count to two",
        "steps": [{ "instructions": "one" }, { "instructions": "two" }],
    } } });
    let (job, fence) = claimed_job(&queue, &raw, "w1").await;
    let usages = [
        json!({ "inputTokens": 1200, "cachedInputTokens": 300, "outputTokens": 45 }),
        json!({ "inputTokens": 10, "outputTokens": 6, "costUsd": 0.25 }),
    ];
    for (index, usage) in usages.into_iter().enumerate() {
        let payload = json!({ "stepIndex": index, "usage": usage });
        let event = NewEvent {
            kind: task::STEP_FINISHED.into(),
            payload: payload.as_object().cloned().unwrap_or_default(),
            ..NewEvent::default()
        };
        queue.append_event(&job.id, &fence, event).await.unwrap();
    }

    let (status, _, html) = get(&app, &cookie, &format!("/tasks/queue/{}", job.id)).await;
    assert_eq!(status, StatusCode::OK);
    for figure in [
        "1,200 in (300 cached) · 45 out",
        "10 in · 6 out · $0.25",
        "1,210 in (300 cached) · 51 out · $0.25",
        r#"data-testid="usage-total""#,
    ] {
        assert!(html.contains(figure), "`{figure}` is not on the job page");
    }

    let (status, _, html) = get(&app, &cookie, "/tasks/queue").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("1.2k in · 51 out · $0.25"),
        "the list does not show the job's usage"
    );
}
