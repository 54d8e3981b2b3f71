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

#[tokio::test]
async fn the_job_page_shows_the_budget_beside_the_usage_and_its_form_raises_it() {
    use stepwise::testing::site::call_server_fn;
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let cookie = session_cookie(&queue).await;
    let raw = json!({ "payload": { "repository": "octo/repo", "task": {
        "instructions": "Spend",
        "runtime": { "mode": "claude" },
        "budget": { "maxCostUsd": 1, "maxTokens": 1000 },
    } } });
    let (job, fence) = claimed_job(&queue, &raw, "w1").await;
    let payload = json!({ "stepIndex": 0, "usage": { "inputTokens": 100, "outputTokens": 20, "costUsd": 1.5 } });
    let event = NewEvent {
        kind: task::STEP_FINISHED.into(),
        payload: payload.as_object().cloned().unwrap_or_default(),
        ..NewEvent::default()
    };
    queue.append_event(&job.id, &fence, event).await.unwrap();
    queue.ack_pause(&job.id, &fence).await.unwrap();

    let page = format!("/tasks/queue/{}", job.id);
    let (status, _, html) = get(&app, &cookie, &page).await;
    assert_eq!(status, StatusCode::OK);
    for said in [
        "$1.50 of $1.00 · 120 of 1,000 tokens",
        "(spent)",
        "its budget is spent: raise it to resume",
        r#"data-testid="budget-form""#,
        r#"name="max_cost_usd""#,
    ] {
        assert!(html.contains(said), "`{said}` is not on the job page");
    }

    // Text that is not a number is named; a number is checked by the queue.
    let form = format!("id={}&max_cost_usd=lots&max_tokens=&max_minutes=", job.id);
    let (status, body) = call_server_fn(&app, &cookie, "set_budget", &form).await;
    assert!(status.is_client_error(), "{status} {body}");
    assert!(body.contains("maxCostUsd"), "{body}");
    let form = format!("id={}&max_cost_usd=3&max_tokens=2000&max_minutes=", job.id);
    let (status, body) = call_server_fn(&app, &cookie, "set_budget", &form).await;
    assert!(status.is_success(), "{status} {body}");
    let raised = queue.get_job(&job.id).await.unwrap();
    assert_eq!(raised.budget().unwrap().max_cost_usd, Some(3.0));
    assert_eq!(raised.budget().unwrap().max_tokens, Some(2000));
    let (_, _, html) = get(&app, &cookie, &page).await;
    assert!(
        html.contains("$1.50 of $3.00 · 120 of 2,000 tokens"),
        "the raised budget"
    );
    assert!(!html.contains("(spent)"));
}
