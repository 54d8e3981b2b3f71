//! A job's usage totals through REST: what a worker reports on its step events, summed on
//! the job that `GET /jobs/{id}` and the list return.

use super::*;

#[tokio::test]
async fn a_jobs_get_carries_the_usage_totals_of_the_steps_a_worker_finished() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let submitted = get_job(&api, &operator, &id).await.1;
    assert_eq!(submitted["usage"], Value::Null, "{submitted}");
    api.claim(&worker, ALL_CAPS).await;
    let usages = [
        json!({ "inputTokens": 1200, "cachedInputTokens": 300, "outputTokens": 45, "reasoningTokens": 12 }),
        json!({ "inputTokens": 10, "outputTokens": 40, "costUsd": 0.0123 }),
    ];
    for (index, usage) in usages.into_iter().enumerate() {
        let event = json!({ "attempt": 1, "kind": "task.step.finished", "message": "done",
            "payload": { "stepIndex": index, "stepId": format!("step-{}", index + 1), "usage": usage } });
        let (status, appended) = api
            .call(
                Method::POST,
                &format!("/api/queue/jobs/{id}/events"),
                Some(&worker),
                Some(event),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{appended}");
    }
    let totals = json!({ "inputTokens": 1210, "cachedInputTokens": 300, "outputTokens": 85,
        "reasoningTokens": 12, "costUsd": 0.0123 });
    let (status, job) = get_job(&api, &operator, &id).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    assert_eq!(job["usage"], totals);
    let (_, list) = api
        .call(Method::GET, "/api/queue/jobs", Some(&operator), None)
        .await;
    assert_eq!(list["items"][0]["id"], id.as_str());
    assert_eq!(list["items"][0]["usage"], totals);

    // A usage the queue cannot add up is refused by name, and the totals stay.
    let bad = json!({ "attempt": 1, "kind": "task.step.finished",
        "payload": { "stepIndex": 1, "usage": { "outputTokens": "many" } } });
    let (status, error) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/events"),
            Some(&worker),
            Some(bad),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(error["errors"][0]["path"], "payload.usage");
    let job = get_job(&api, &operator, &id).await.1;
    assert_eq!(job["usage"], totals);

    let (_, doc) = api
        .call(Method::GET, "/api/openapi.json", Some(&operator), None)
        .await;
    assert!(
        doc["components"]["schemas"]["Job"]["properties"]["usage"].is_object(),
        "Job.usage is missing from the schema"
    );
    assert!(doc["components"]["schemas"]["StepUsage"]["properties"]["costUsd"].is_object());
}

async fn get_job(api: &Api, token: &str, id: &str) -> (StatusCode, Value) {
    api.call(
        Method::GET,
        &format!("/api/queue/jobs/{id}"),
        Some(token),
        None,
    )
    .await
}
