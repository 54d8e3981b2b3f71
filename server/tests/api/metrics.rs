//! `/metrics`: the Prometheus text for a user token; what the queue did on this server in
//! its counters and histograms, the jobs in each state when scraped, the streams open now;
//! and on the whole site, on both backends, each request counted by its route.

use axum::http::header;
use stepwise::http::auth::{Scope, mint};
use stepwise::testing::site::{Backend, TestDb, send, test_site_on};

use super::*;

/// The value of the one sample named exactly `series` (its name and labels as exposed).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().unwrap())
    })
}

fn assert_samples(text: &str, expected: &[(&str, f64)]) {
    for (series, value) in expected {
        assert_eq!(sample(text, series), Some(*value), "{series} in\n{text}");
    }
}

async fn scrape(api: &Api, token: &str) -> String {
    let (status, body) = api.call(Method::GET, "/metrics", Some(token), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_str().expect("text").to_string()
}

async fn post(api: &Api, token: &str, path: &str, body: Value) {
    let (status, answer) = api.call(Method::POST, path, Some(token), Some(body)).await;
    assert!(status.is_success(), "{path}: {status} {answer}");
}

#[tokio::test]
async fn metrics_count_what_the_queue_did_and_need_a_user_token() {
    let api = api().await;
    let viewer = api.user(Role::Viewer).await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let (status, _) = api.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = api.call(Method::GET, "/metrics", Some(&worker), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let before = scrape(&api, &viewer).await;
    assert_samples(
        &before,
        &[
            ("stepwise_jobs_submitted_total", 0.0),
            (r#"stepwise_jobs{state="queued"}"#, 0.0),
            ("stepwise_embedded_worker_running_jobs", 0.0),
        ],
    );
    assert!(
        before.contains("# HELP stepwise_claim_wait_seconds "),
        "{before}"
    );

    // One job runs a step that reports what it used, and succeeds.
    let done = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&worker, ALL_CAPS).await;
    let step = json!({ "stepIndex": 0, "stepId": "step-1", "effectiveSkill": "auto",
        "hasStepInstructions": true });
    let events = format!("/api/queue/jobs/{done}/events");
    post(
        &api,
        &worker,
        &events,
        json!({ "attempt": 1, "kind": "task.step.started", "message": "step 1", "payload": step }),
    )
    .await;
    let mut finished = step.clone();
    finished["usage"] = json!({ "inputTokens": 1200, "outputTokens": 45, "costUsd": 0.5 });
    post(&api, &worker, &events,
        json!({ "attempt": 1, "kind": "task.step.finished", "message": "done", "payload": finished }))
    .await;
    post(
        &api,
        &worker,
        &format!("/api/queue/jobs/{done}/complete"),
        json!({ "attempt": 1 }),
    )
    .await;
    // A second is cancelled while it runs; a third waits.
    let cancelled = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&worker, ALL_CAPS).await;
    post(
        &api,
        &operator,
        &format!("/api/queue/jobs/{cancelled}/cancel"),
        json!({ "reason": "no" }),
    )
    .await;
    post(
        &api,
        &worker,
        &format!("/api/queue/jobs/{cancelled}/cancel/ack"),
        json!({ "attempt": 1 }),
    )
    .await;
    api.submit(&operator, "none").await;

    let text = scrape(&api, &viewer).await;
    assert_samples(
        &text,
        &[
            ("stepwise_jobs_submitted_total", 3.0),
            ("stepwise_jobs_claimed_total", 2.0),
            (r#"stepwise_jobs_ended_total{state="succeeded"}"#, 1.0),
            (r#"stepwise_jobs_ended_total{state="cancelled"}"#, 1.0),
            (r#"stepwise_jobs{state="queued"}"#, 1.0),
            (r#"stepwise_jobs{state="running"}"#, 0.0),
            (r#"stepwise_jobs{state="succeeded"}"#, 1.0),
            (r#"stepwise_jobs{state="cancelled"}"#, 1.0),
            (
                r#"stepwise_tokens_total{runtime="codex",model="default",kind="input"}"#,
                1200.0,
            ),
            (
                r#"stepwise_tokens_total{runtime="codex",model="default",kind="output"}"#,
                45.0,
            ),
            (
                r#"stepwise_cost_usd_total{runtime="codex",model="default"}"#,
                0.5,
            ),
            (
                r#"stepwise_step_duration_seconds_count{runtime="codex"}"#,
                1.0,
            ),
            (
                r#"stepwise_job_duration_seconds_count{runtime="codex"}"#,
                2.0,
            ),
            ("stepwise_claim_wait_seconds_count", 2.0),
            ("stepwise_cancel_stop_seconds_count", 1.0),
        ],
    );
}

#[tokio::test]
async fn an_open_event_stream_is_counted_until_it_closes() {
    let api = api().await;
    let viewer = api.user(Role::Viewer).await;
    let request = Request::get("/api/queue/jobs/stream")
        .header(header::AUTHORIZATION, format!("Bearer {viewer}"))
        .body(Body::empty())
        .unwrap();
    let stream = api.router.clone().oneshot(request).await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let open = r#"stepwise_event_streams_open{stream="jobs"}"#;
    assert_eq!(sample(&scrape(&api, &viewer).await, open), Some(1.0));
    drop(stream);
    assert_eq!(sample(&scrape(&api, &viewer).await, open), Some(0.0));
}

async fn requests_are_counted_by_route_not_path(backend: Backend) {
    let site = tempfile::tempdir().unwrap();
    let db = TestDb::new(backend).await;
    let (app, queue) = test_site_on(site.path(), "none", db.url.as_deref()).await;
    let minted = mint("admin", queue::TokenKind::User, Scope::user(Role::Admin)).unwrap();
    queue.create_token(minted.record).await.unwrap();
    let call = |method: Method, path: String, body: Option<Value>| {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {}", minted.secret));
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        request
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap()
    };
    let (status, _, job) = send(
        &app,
        call(Method::POST, "/api/queue/jobs".into(), Some(task("none"))),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let id = serde_json::from_str::<Value>(&job).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for _ in 0..2 {
        let (status, _, _) = send(
            &app,
            call(Method::GET, format!("/api/queue/jobs/{id}"), None),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _, _) = send(
        &app,
        call(Method::GET, "/api/queue/jobs/no-such-job".into(), None),
    )
    .await;
    assert!(status.is_client_error());
    let (status, _, text) = send(&app, call(Method::GET, "/metrics".into(), None)).await;
    assert_eq!(status, StatusCode::OK, "{backend:?}: {text}");
    assert_samples(
        &text,
        &[
            (
                r#"stepwise_http_requests_total{method="POST",route="/api/queue/jobs",status="201"}"#,
                1.0,
            ),
            (
                r#"stepwise_http_requests_total{method="GET",route="/api/queue/jobs/{id}",status="200"}"#,
                2.0,
            ),
            (
                r#"stepwise_http_request_duration_seconds_count{method="GET",route="/api/queue/jobs/{id}"}"#,
                3.0,
            ),
            (r#"stepwise_jobs{state="queued"}"#, 1.0),
            ("stepwise_jobs_submitted_total", 1.0),
        ],
    );
    assert!(!text.contains(&id), "a path became a label: {text}");
}

#[tokio::test]
async fn requests_are_counted_by_route_not_path_on_sqlite() {
    requests_are_counted_by_route_not_path(Backend::Sqlite).await;
}

#[tokio::test]
async fn requests_are_counted_by_route_not_path_on_postgres() {
    requests_are_counted_by_route_not_path(Backend::Postgres).await;
}
