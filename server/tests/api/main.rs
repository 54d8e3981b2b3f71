//! Every route through the router (tower `oneshot`), and the SSE stream through a real socket;
//! `client`: the worker's and the CLI's `QueueClient` against it on a real socket. Long
//! because it is one case per route and refusal; the cases share the `Api` helper below.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use queue::{Role, TokenKind};
use serde_json::{Value, json};
use tower::ServiceExt;

use stepwise::testing::{Fixture, fixture};

mod client;
mod health;
mod limits;
mod metrics;
mod schedules;
mod seed_worker;
mod usage;

struct Api {
    router: Router,
    fixture: Fixture,
}

const ARTIFACT_LIMIT: u64 = 1024;

async fn api() -> Api {
    let fixture = fixture(ARTIFACT_LIMIT).await;
    Api {
        router: fixture.router.clone(),
        fixture,
    }
}

impl Api {
    async fn token(
        &self,
        name: &str,
        kind: TokenKind,
        role: Option<Role>,
        capabilities: Option<Vec<&str>>,
    ) -> String {
        self.fixture.token(name, kind, role, capabilities).await
    }

    async fn user(&self, role: Role) -> String {
        self.token(role.as_str(), TokenKind::User, Some(role), None)
            .await
    }

    async fn worker(&self, name: &str) -> String {
        self.token(name, TokenKind::Worker, None, None).await
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = match body {
            Some(body) => request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        };
        self.send(request.unwrap()).await
    }

    async fn send(&self, request: Request<Body>) -> (StatusCode, Value) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let json = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, json)
    }

    async fn submit(&self, token: &str, publish: &str) -> Value {
        let (status, job) = self
            .call(
                Method::POST,
                "/api/queue/jobs",
                Some(token),
                Some(task(publish)),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{job}");
        job
    }

    async fn claim(&self, worker: &str, capabilities: &[&str]) -> Value {
        let body = json!({ "capabilities": capabilities, "leaseSeconds": 30 });
        let (status, claimed) = self
            .call(
                Method::POST,
                "/api/queue/jobs/claim",
                Some(worker),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{claimed}");
        claimed["job"].clone()
    }
}

fn task(publish: &str) -> Value {
    json!({
        "type": "task",
        "payload": {
            "repository": "octo/hello",
            "task": {
                "instructions": "Add a README",
                "publish": { "mode": publish },
                "steps": [{ "instructions": "write it" }, { "instructions": "link it" }]
            }
        }
    })
}

const ALL_CAPS: &[&str] = &["codex", "git", "gh"];

#[tokio::test]
async fn every_route_refuses_a_request_without_a_token() {
    let api = api().await;
    let id = "0190a000-0000-7000-8000-000000000000";
    let routes = [
        (Method::POST, "/api/queue/jobs".to_string(), "auth_failed"),
        (Method::GET, "/api/queue/jobs".to_string(), "auth_failed"),
        (Method::GET, format!("/api/queue/jobs/{id}"), "auth_failed"),
        (
            Method::POST,
            format!("/api/queue/jobs/{id}/cancel"),
            "auth_failed",
        ),
        (
            Method::GET,
            format!("/api/queue/jobs/{id}/events"),
            "auth_failed",
        ),
        (
            Method::GET,
            format!("/api/queue/jobs/{id}/events/stream"),
            "auth_failed",
        ),
        (
            Method::GET,
            format!("/api/queue/jobs/{id}/artifacts"),
            "auth_failed",
        ),
        (
            Method::GET,
            format!("/api/queue/jobs/{id}/artifacts/x/download"),
            "auth_failed",
        ),
        (
            Method::POST,
            "/api/queue/jobs/claim".to_string(),
            "worker_auth_failed",
        ),
        (
            Method::POST,
            format!("/api/queue/jobs/{id}/heartbeat"),
            "worker_auth_failed",
        ),
        (
            Method::POST,
            format!("/api/queue/jobs/{id}/complete"),
            "worker_auth_failed",
        ),
        (
            Method::POST,
            format!("/api/queue/jobs/{id}/fail"),
            "worker_auth_failed",
        ),
        (
            Method::POST,
            format!("/api/queue/jobs/{id}/events"),
            "worker_auth_failed",
        ),
        (
            Method::POST,
            format!("/api/queue/jobs/{id}/cancel/ack"),
            "worker_auth_failed",
        ),
        (
            Method::POST,
            format!("/api/queue/jobs/{id}/artifacts/upload"),
            "worker_auth_failed",
        ),
    ];
    for (method, uri, code) in routes {
        let (status, body) = api.call(method.clone(), &uri, None, Some(json!({}))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri}: {body}");
        assert_eq!(body["code"], code, "{method} {uri}");
        let (status, _) = api
            .call(
                method.clone(),
                &uri,
                Some("swu_not-a-real-token"),
                Some(json!({})),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {uri} with an unknown token"
        );
    }
}

#[tokio::test]
async fn submit_answers_201_with_the_normalized_job() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let job = api.submit(&operator, "pr").await;
    assert_eq!(job["status"], "queued");
    assert_eq!(job["type"], "task");
    assert_eq!(job["requiredCapabilities"], json!(["codex", "git", "gh"]));
    assert_eq!(job["createdByUserId"], "operator");
    assert_eq!(job["payload"]["task"]["steps"][1]["id"], "step-2");
    let (status, fetched) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs/{}", job["id"].as_str().unwrap()),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched, job);
}

#[tokio::test]
async fn invalid_payload_is_422_listing_every_field_error() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let body = json!({ "payload": { "task": { "steps": [{ "runtime": "claude" }] } } });
    let (status, error) = api
        .call(Method::POST, "/api/queue/jobs", Some(&operator), Some(body))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error["code"], "invalid_queue_payload");
    let paths: Vec<&str> = error["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"repository"), "{paths:?}");
    assert!(paths.contains(&"task.instructions"), "{paths:?}");
    assert!(paths.contains(&"task.steps[0].runtime"), "{paths:?}");
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_400_in_the_api_shape() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let request = Request::post("/api/queue/jobs")
        .header(header::AUTHORIZATION, format!("Bearer {operator}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    let (status, error) = api.send(request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error["code"], "invalid_request");
}

#[tokio::test]
async fn viewers_read_but_cannot_submit_or_cancel() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let viewer = api.user(Role::Viewer).await;
    let job = api.submit(&operator, "none").await;
    let id = job["id"].as_str().unwrap();
    let (status, _) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs/{id}"),
            Some(&viewer),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, error) = api
        .call(
            Method::POST,
            "/api/queue/jobs",
            Some(&viewer),
            Some(task("none")),
        )
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("not_authorized"))
    );
    let (status, _) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/cancel"),
            Some(&viewer),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, job) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs/{id}"),
            Some(&viewer),
            None,
        )
        .await;
    assert_eq!(job["status"], "queued");
}

#[tokio::test]
async fn user_and_worker_tokens_do_not_open_each_others_routes() {
    let api = api().await;
    let admin = api.user(Role::Admin).await;
    let worker = api.worker("w1").await;
    let (status, error) = api
        .call(
            Method::POST,
            "/api/queue/jobs/claim",
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("worker_not_authorized"))
    );
    let (status, error) = api
        .call(Method::GET, "/api/queue/jobs", Some(&worker), None)
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("not_authorized"))
    );
}

#[tokio::test]
async fn only_the_worker_holding_a_job_may_follow_its_event_stream() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let (holder, other) = (api.worker("w1").await, api.worker("w2").await);
    let id = api.submit(&operator, "pr").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let uri = format!("/api/queue/jobs/{id}/events/stream");
    // Not claimed yet: no worker holds it.
    let (status, error) = api.call(Method::GET, &uri, Some(&holder), None).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("worker_not_authorized"))
    );
    api.claim(&holder, ALL_CAPS).await;
    let (status, error) = api.call(Method::GET, &uri, Some(&other), None).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("worker_not_authorized"))
    );
    // The holder's stream opens (its body never ends, so only the head is read).
    let request = Request::builder()
        .uri(&uri)
        .header(header::AUTHORIZATION, format!("Bearer {holder}"))
        .body(Body::empty())
        .unwrap();
    let response = api.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
}

#[tokio::test]
async fn list_filters_by_status_and_pages_with_a_cursor() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            api.submit(&operator, "none").await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    api.call(
        Method::POST,
        &format!("/api/queue/jobs/{}/cancel", ids[0]),
        Some(&operator),
        None,
    )
    .await;
    let (_, page) = api
        .call(
            Method::GET,
            "/api/queue/jobs?status=queued&limit=2",
            Some(&operator),
            None,
        )
        .await;
    let first: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(first, [ids[4].as_str(), ids[3].as_str()]);
    let cursor = page["nextCursor"].as_str().unwrap();
    let (_, page) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs?status=queued&limit=2&cursor={cursor}"),
            Some(&operator),
            None,
        )
        .await;
    let second: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(second, [ids[2].as_str(), ids[1].as_str()]);
    let (_, cancelled) = api
        .call(
            Method::GET,
            "/api/queue/jobs?status=cancelled",
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(cancelled["items"].as_array().unwrap().len(), 1);
    let (status, error) = api
        .call(
            Method::GET,
            "/api/queue/jobs?status=sleeping",
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error["errors"][0]["path"], "status");
}

#[tokio::test]
async fn a_worker_claims_reports_and_completes_a_job() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let id = api.submit(&operator, "pr").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let job = api.claim(&worker, ALL_CAPS).await;
    assert_eq!(
        (job["id"].as_str(), job["status"].as_str()),
        (Some(id.as_str()), Some("running"))
    );
    assert_eq!(job["claimedBy"], "w1");
    assert_eq!(job["attempt"], 1);

    let fence = json!({ "attempt": 1 });
    let (status, beat) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/heartbeat"),
            Some(&worker),
            Some(json!({ "attempt": 1, "leaseSeconds": 60 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{beat}");
    assert_eq!(beat["cancelRequestedAt"], Value::Null);
    let event = json!({ "attempt": 1, "kind": "task.step.started", "message": "step 1", "payload": { "stepIndex": 0, "stepId": "step-1" } });
    let (status, appended) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/events"),
            Some(&worker),
            Some(event),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{appended}");
    assert_eq!(appended["payload"]["stepId"], "step-1");
    let done = json!({ "attempt": 1, "resultSummary": "2 steps, PR opened" });
    let (status, job) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/complete"),
            Some(&worker),
            Some(done),
        )
        .await;
    assert_eq!(
        (status, job["status"].as_str()),
        (StatusCode::OK, Some("succeeded"))
    );
    assert_eq!(job["resultSummary"], "2 steps, PR opened");

    let (_, events) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs/{id}/events"),
            Some(&operator),
            None,
        )
        .await;
    let kinds: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "job.created",
            "job.claimed",
            "task.step.started",
            "job.completed"
        ]
    );
    let after = events["items"][1]["id"].as_i64().unwrap();
    let (_, tail) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs/{id}/events?after={after}&limit=1"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(tail["items"].as_array().unwrap().len(), 1);
    assert_eq!(tail["items"][0]["kind"], "task.step.started");

    // Finished is finished: the same fence cannot write again.
    let (status, error) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/fail"),
            Some(&worker),
            Some(json!({ "attempt": 1, "errorMessage": "late" })),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{error}");
    let _ = fence;
}

#[tokio::test]
async fn a_failure_is_final_unless_retryable() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&worker, ALL_CAPS).await;
    let body = json!({ "attempt": 1, "errorMessage": "clone failed: network", "retryable": true });
    let (status, job) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/fail"),
            Some(&worker),
            Some(body),
        )
        .await;
    assert_eq!(
        (status, job["status"].as_str()),
        (StatusCode::OK, Some("queued"))
    );
    assert_eq!(job["errorMessage"], "clone failed: network");
    assert_eq!(job["claimedBy"], Value::Null);

    let other = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let claimed = api.claim(&worker, ALL_CAPS).await;
    assert_eq!(
        claimed["id"].as_str(),
        Some(other.as_str()),
        "the retried job waits for its backoff"
    );
    let body = json!({ "attempt": 1, "errorMessage": "step 2 failed" });
    let (_, job) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{other}/fail"),
            Some(&worker),
            Some(body),
        )
        .await;
    assert_eq!(job["status"], "failed");
}

#[tokio::test]
async fn a_worker_cannot_act_for_another_or_with_a_stale_attempt() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let w1 = api.worker("w1").await;
    let w2 = api.worker("w2").await;
    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&w1, ALL_CAPS).await;
    let (status, error) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/complete"),
            Some(&w2),
            Some(json!({ "attempt": 1 })),
        )
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::CONFLICT, Some("job_ownership_mismatch"))
    );
    let (status, error) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/complete"),
            Some(&w2),
            Some(json!({ "attempt": 1, "workerId": "w1" })),
        )
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("worker_not_authorized"))
    );
    let (status, error) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/heartbeat"),
            Some(&w1),
            Some(json!({ "attempt": 2 })),
        )
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::CONFLICT, Some("job_ownership_mismatch"))
    );
    // Naming no attempt (as the seed system's worker does) is fenced on the lease held.
    let (status, error) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/heartbeat"),
            Some(&w2),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::CONFLICT, Some("job_ownership_mismatch"))
    );
    let (status, job) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/heartbeat"),
            Some(&w1),
            Some(json!({})),
        )
        .await;
    assert_eq!((status, job["attempt"].as_u64()), (StatusCode::OK, Some(1)));
}

#[tokio::test]
async fn a_worker_token_scope_limits_what_it_can_claim() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let narrow = api
        .token("git-only", TokenKind::Worker, None, Some(vec!["git"]))
        .await;
    api.submit(&operator, "none").await;
    // It asks for codex too, but its token only allows git: the codex task is not for it.
    assert_eq!(api.claim(&narrow, &["codex", "git"]).await, Value::Null);
}

#[tokio::test]
async fn a_claim_records_the_worker_with_what_its_token_lets_it_run() {
    let api = api().await;
    let narrow = api
        .token("git-only", TokenKind::Worker, None, Some(vec!["git"]))
        .await;
    let body = json!({ "capabilities": ["codex", "git"], "workerVersion": "stepwise-worker 9.9" });
    let (status, _) = api
        .call(
            Method::POST,
            "/api/queue/jobs/claim",
            Some(&narrow),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let workers = api.fixture.queue.list_workers().await.unwrap();
    assert_eq!(workers.len(), 1);
    assert_eq!(workers[0].id, "git-only");
    assert_eq!(workers[0].capabilities, ["git"]);
    assert_eq!(workers[0].version.as_deref(), Some("stepwise-worker 9.9"));
}

#[tokio::test]
async fn cancel_is_immediate_when_queued_and_acknowledged_when_running() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let queued = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, job) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{queued}/cancel"),
            Some(&operator),
            Some(json!({ "reason": "typo" })),
        )
        .await;
    assert_eq!(
        (status, job["status"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );
    assert_eq!(job["cancelReason"], "typo");
    assert_eq!(job["cancelRequestedByUserId"], "operator");
    let (status, again) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{queued}/cancel"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(
        (status, again["status"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );

    let running = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&worker, ALL_CAPS).await;
    let (_, job) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{running}/cancel"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(job["status"], "running");
    assert!(job["cancelRequestedAt"].is_string());
    let (_, beat) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{running}/heartbeat"),
            Some(&worker),
            Some(json!({ "attempt": 1 })),
        )
        .await;
    assert!(
        beat["cancelRequestedAt"].is_string(),
        "the heartbeat tells the worker"
    );
    let (status, job) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{running}/cancel/ack"),
            Some(&worker),
            Some(json!({ "attempt": 1 })),
        )
        .await;
    assert_eq!(
        (status, job["status"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );
    assert_eq!(job["claimedBy"], Value::Null);
}

#[tokio::test]
async fn cancelling_a_finished_job_is_a_conflict_and_unknown_jobs_are_404() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&worker, ALL_CAPS).await;
    api.call(
        Method::POST,
        &format!("/api/queue/jobs/{id}/complete"),
        Some(&worker),
        Some(json!({ "attempt": 1 })),
    )
    .await;
    let (status, error) = api
        .call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/cancel"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::CONFLICT, Some("job_state_conflict"))
    );
    // Text that is not a job id names no job, on every route of a job.
    for (method, path) in [
        (Method::GET, "/api/queue/jobs/no-such-job"),
        (Method::GET, "/api/queue/jobs/no-such-job/events"),
        (Method::GET, "/api/queue/jobs/no-such-job/artifacts"),
        (Method::GET, "/api/queue/jobs/%3Cb%3E/artifacts/a1/download"),
        (Method::POST, "/api/queue/jobs/no-such-job/cancel"),
    ] {
        let (status, error) = api.call(method, path, Some(&operator), None).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (StatusCode::NOT_FOUND, Some("job_not_found")),
            "{path}: {error}"
        );
    }
}

fn multipart(fields: &[(&str, &str)], file: Option<&[u8]>) -> (String, Vec<u8>) {
    let boundary = "stepwise-test-boundary";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    if let Some(bytes) = file {
        body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\nContent-Type: text/plain\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[tokio::test]
async fn artifacts_upload_list_download_and_limits() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&worker, ALL_CAPS).await;
    let upload = |fields: Vec<(&'static str, &'static str)>, file: Option<Vec<u8>>| {
        let (content_type, body) = multipart(&fields, file.as_deref());
        Request::post(format!("/api/queue/jobs/{id}/artifacts/upload"))
            .header(header::AUTHORIZATION, format!("Bearer {worker}"))
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap()
    };
    let (status, artifact) = api
        .send(upload(
            vec![("name", "logs/steps/step-0001.log"), ("attempt", "1")],
            Some(b"hello log".to_vec()),
        ))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{artifact}");
    assert_eq!(artifact["size"], 9);
    assert_eq!(artifact["contentType"], "text/plain");

    let (status, error) = api
        .send(upload(
            vec![("name", "big.bin"), ("attempt", "1")],
            Some(vec![b'x'; 4096]),
        ))
        .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")),
        "{error}"
    );
    let (status, error) = api
        .send(upload(
            vec![("name", "../escape"), ("attempt", "1")],
            Some(b"x".to_vec()),
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    let (status, error) = api.send(upload(vec![], None)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let paths: Vec<&str> = error["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    // The attempt may be left out (the lease held is the fence then), never the rest.
    assert_eq!(paths, ["name", "file"]);

    let (_, list) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs/{id}/artifacts"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let artifact_id = list["items"][0]["id"].as_str().unwrap();
    let request = Request::get(format!(
        "/api/queue/jobs/{id}/artifacts/{artifact_id}/download"
    ))
    .header(header::AUTHORIZATION, format!("Bearer {operator}"))
    .body(Body::empty())
    .unwrap();
    let response = api.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::X_CONTENT_TYPE_OPTIONS],
        "nosniff"
    );
    assert!(
        response.headers()[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    assert_eq!(&bytes[..], b"hello log");
}

#[tokio::test]
async fn a_claim_wait_of_any_size_is_clamped_not_a_panic() {
    let api = api().await;
    let admin = api.user(Role::Admin).await;
    let worker = api.worker("w1").await;
    // 1e20 s does not fit a Duration: converted first, it panicked the handler and the
    // connection closed with no answer. A job is waiting, so each claim answers at once.
    for wait in [json!(1e20), json!(f64::MAX)] {
        api.submit(&admin, "none").await;
        let body = json!({ "capabilities": ALL_CAPS, "waitSeconds": wait });
        let (status, claimed) = api
            .call(
                Method::POST,
                "/api/queue/jobs/claim",
                Some(&worker),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{wait}: {claimed}");
    }
    for wait in [json!(-1), json!("soon")] {
        let body = json!({ "capabilities": ALL_CAPS, "waitSeconds": wait });
        let (status, answer) = api
            .call(
                Method::POST,
                "/api/queue/jobs/claim",
                Some(&worker),
                Some(body),
            )
            .await;
        assert!(status.is_client_error(), "{wait}: {status} {answer}");
        assert!(answer["code"].is_string(), "{answer}");
    }
}

#[tokio::test]
async fn a_long_polling_claim_wakes_when_a_job_is_submitted() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let router = api.router.clone();
    let poll = tokio::spawn(async move {
        let request = Request::post("/api/queue/jobs/claim")
            .header(header::AUTHORIZATION, format!("Bearer {worker}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({ "capabilities": ALL_CAPS, "waitSeconds": 20 }).to_string(),
            ))
            .unwrap();
        let response = router.oneshot(request).await.unwrap();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        serde_json::from_slice::<Value>(&bytes).unwrap()
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let id = api.submit(&operator, "none").await["id"].clone();
    let claimed = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("the claim must wake")
        .unwrap();
    assert_eq!(claimed["job"]["id"], id);
}

/// The router served on a free loopback port: its address and the serving task.
async fn serve(
    router: Router,
) -> (
    std::net::SocketAddr,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (
        addr,
        tokio::spawn(axum::serve(listener, router).into_future()),
    )
}

/// `GET path` as an event stream over a real socket, with `headers` (each ending in CRLF).
async fn open_stream(
    addr: std::net::SocketAddr,
    path: &str,
    token: &str,
    headers: &str,
) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n{headers}\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// Reads from a raw socket until `needle` has arrived (or panics after a timeout).
async fn read_until(stream: &mut tokio::net::TcpStream, seen: &mut String, needle: &str) {
    use tokio::io::AsyncReadExt;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 4096];
    while !seen.contains(needle) {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {needle:?}; got {seen}"))
            .unwrap();
        assert!(n > 0, "the stream closed before {needle:?}; got {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

#[tokio::test]
async fn the_event_stream_replays_after_last_event_id_then_pushes_live_over_a_real_socket() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.claim(&worker, ALL_CAPS).await;
    let (_, events) = api
        .call(
            Method::GET,
            &format!("/api/queue/jobs/{id}/events"),
            Some(&operator),
            None,
        )
        .await;
    let created_id = events["items"][0]["id"].as_i64().unwrap();

    let (addr, server) = serve(api.router.clone()).await;
    let path = format!("/api/queue/jobs/{id}/events/stream");
    let last = format!("Last-Event-ID: {created_id}\r\n");
    let mut stream = open_stream(addr, &path, &operator, &last).await;
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, "event: job.claimed").await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(
        seen.to_lowercase()
            .contains("content-type: text/event-stream"),
        "{seen}"
    );
    assert!(
        !seen.contains("event: job.created"),
        "replay starts after Last-Event-ID"
    );

    let event = json!({ "attempt": 1, "kind": "task.step.started", "message": "live", "payload": { "stepIndex": 0 } });
    api.call(
        Method::POST,
        &format!("/api/queue/jobs/{id}/events"),
        Some(&worker),
        Some(event),
    )
    .await;
    read_until(&mut stream, &mut seen, "event: task.step.started").await;
    assert!(seen.contains("\"message\":\"live\""), "{seen}");
    server.abort();
}

#[tokio::test]
async fn the_jobs_stream_names_each_changed_job_and_its_step_progress_over_a_real_socket() {
    let api = api().await;
    let viewer = api.user(Role::Viewer).await;
    let operator = api.user(Role::Operator).await;
    let worker = api.worker("w1").await;
    let (status, _) = api
        .call(Method::GET, "/api/queue/jobs/stream", Some(&worker), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "workers do not list jobs");

    let (addr, server) = serve(api.router.clone()).await;
    let mut stream = open_stream(addr, "/api/queue/jobs/stream", &viewer, "").await;
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, "\r\n\r\n").await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");

    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let changed = format!(r#"data: {{"jobId":"{id}","what":"changed"}}"#);
    read_until(&mut stream, &mut seen, &changed).await;
    assert!(seen.contains("event: job\n"), "{seen}");
    api.claim(&worker, ALL_CAPS).await;
    for kind in ["task.step.log", "task.step.finished"] {
        let event = json!({ "attempt": 1, "kind": kind, "payload": { "stepIndex": 0 } });
        api.call(
            Method::POST,
            &format!("/api/queue/jobs/{id}/events"),
            Some(&worker),
            Some(event),
        )
        .await;
    }
    let progress = format!(r#"data: {{"jobId":"{id}","what":"progress"}}"#);
    read_until(&mut stream, &mut seen, &progress).await;
    assert_eq!(
        seen.matches(&progress).count(),
        1,
        "a log line is no progress: {seen}"
    );
    server.abort();
}

/// A server that stops serving ends its open streams, so its shutdown does not wait on a
/// browser tab that is still watching.
#[tokio::test]
async fn open_streams_end_when_the_server_stops_serving() {
    use tokio::io::AsyncReadExt;
    let api = api().await;
    let viewer = api.user(Role::Viewer).await;
    let operator = api.user(Role::Operator).await;
    let id = api.submit(&operator, "none").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (addr, server) = serve(api.router.clone()).await;
    let mut streams = Vec::new();
    for path in [
        "/api/queue/jobs/stream".to_string(),
        format!("/api/queue/jobs/{id}/events/stream"),
    ] {
        let mut stream = open_stream(addr, &path, &viewer, "").await;
        let mut seen = String::new();
        read_until(&mut stream, &mut seen, "\r\n\r\n").await;
        streams.push((path, stream, seen));
    }
    api.fixture.closing.cancel();
    for (path, mut stream, mut seen) in streams {
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            let mut buf = [0u8; 4096];
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                if n == 0 {
                    return;
                }
                seen.push_str(&String::from_utf8_lossy(&buf[..n]));
                // A chunked body ends with its zero-length chunk.
                if seen.ends_with("0\r\n\r\n") {
                    return;
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "{path} is still open: {seen}");
    }
    server.abort();
}

#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let api = api().await;
    let viewer = api.user(Role::Viewer).await;
    let (status, _) = api.call(Method::GET, "/api/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, doc) = api
        .call(Method::GET, "/api/openapi.json", Some(&viewer), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let expected = [
        ("post", "/api/queue/jobs"),
        ("get", "/api/queue/jobs"),
        ("get", "/api/queue/jobs/{id}"),
        ("post", "/api/queue/jobs/{id}/cancel"),
        ("get", "/api/queue/jobs/{id}/events"),
        ("get", "/api/queue/jobs/{id}/checkpoints"),
        ("get", "/api/queue/jobs/{id}/events/stream"),
        ("get", "/api/queue/jobs/stream"),
        ("get", "/api/queue/jobs/{id}/artifacts"),
        (
            "get",
            "/api/queue/jobs/{id}/artifacts/{artifact_id}/download",
        ),
        ("post", "/api/queue/jobs/{id}/artifacts/upload"),
        ("post", "/api/queue/jobs/claim"),
        ("post", "/api/queue/jobs/{id}/heartbeat"),
        ("post", "/api/queue/jobs/{id}/complete"),
        ("post", "/api/queue/jobs/{id}/complete-and-claim"),
        ("post", "/api/queue/jobs/{id}/fail"),
        ("post", "/api/queue/jobs/{id}/events"),
        ("post", "/api/queue/jobs/{id}/cancel/ack"),
        ("post", "/api/queue/jobs/{id}/pause"),
        ("post", "/api/queue/jobs/{id}/resume"),
        ("post", "/api/queue/jobs/{id}/retry"),
        ("post", "/api/queue/jobs/{id}/approve"),
        ("post", "/api/queue/jobs/{id}/reject"),
        ("post", "/api/queue/jobs/{id}/steps"),
        ("post", "/api/queue/jobs/{id}/budget"),
        ("post", "/api/queue/jobs/{id}/follow-up"),
        ("post", "/api/queue/jobs/{id}/pause/ack"),
        ("post", "/api/queue/jobs/{id}/resume/patch"),
        ("post", "/api/queue/jobs/{id}/resume/session"),
        ("post", "/api/queue/jobs/{id}/approval/request"),
        ("post", "/api/integrations/github"),
        ("post", "/api/queue/schedules"),
        ("get", "/api/queue/schedules"),
        ("get", "/api/queue/schedules/{id}"),
        ("delete", "/api/queue/schedules/{id}"),
        ("post", "/api/queue/schedules/{id}/pause"),
        ("post", "/api/queue/schedules/{id}/resume"),
        ("get", "/healthz"),
        ("get", "/readyz"),
        ("get", "/metrics"),
    ];
    for (method, path) in expected {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} is not documented"
        );
    }
    let documented: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p.as_object().unwrap().len())
        .sum();
    assert_eq!(
        documented,
        expected.len(),
        "a documented route the test does not know"
    );
    let job = &doc["components"]["schemas"]["Job"]["properties"];
    for field in [
        "cancelRequestedAt",
        "cancelRequestedByUserId",
        "cancelReason",
        "requiredCapabilities",
        "attempt",
    ] {
        assert!(
            job[field].is_object(),
            "Job.{field} is missing from the schema"
        );
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // The probes alone take no token, and the document says so.
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(
            doc["paths"][probe]["get"]["security"],
            serde_json::json!([{}]),
            "{probe}"
        );
    }
}

#[tokio::test]
async fn an_unknown_api_route_or_method_is_refused_in_the_api_shape() {
    let api = api().await;
    let admin = api.user(Role::Admin).await;
    for (method, uri, status, code) in [
        (
            Method::POST,
            "/api/queue/jobs/cancel/ack",
            StatusCode::NOT_FOUND,
            "route_not_found",
        ),
        (
            Method::GET,
            "/api/queue/nothing/here",
            StatusCode::NOT_FOUND,
            "route_not_found",
        ),
        (
            Method::DELETE,
            "/api/queue/jobs",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            Method::PUT,
            "/api/queue/jobs/claim",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
    ] {
        let (got, body) = api.call(method.clone(), uri, Some(&admin), None).await;
        assert_eq!(got, status, "{method} {uri}: {body}");
        assert_eq!(body["code"], code, "{method} {uri}: {body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("openapi.json")),
            "{body}"
        );
    }
}
