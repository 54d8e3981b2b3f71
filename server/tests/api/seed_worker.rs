//! The seed system's own worker, unchanged, against a real socket: its token in
//! `X-MoonMind-Worker-Token`, no `attempt` on any write, events with their kind in
//! `message`, uploads with a `digest`. Claim, heartbeat, events, upload and complete; fail;
//! and cancel/ack, each as that client sends them.

use queue::{Role, TokenKind};
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use stepwise::testing::server::{TestServer, start};

const WORKER: &str = "moonmind-worker-1";

/// A client that speaks exactly the seed system's dialect.
struct SeedWorker {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl SeedWorker {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}/api/queue{path}", self.base))
            .header("X-MoonMind-Worker-Token", &self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn claim(&self) -> Value {
        let (status, body) = self
            .post(
                "/jobs/claim",
                json!({ "workerId": WORKER, "leaseSeconds": 60, "allowedTypes": ["task"],
                        "workerCapabilities": ["codex", "git"] }),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["job"].clone()
    }

    async fn event(&self, id: &str, message: &str, payload: Value) -> Value {
        let (status, event) = self
            .post(
                &format!("/jobs/{id}/events"),
                json!({ "workerId": WORKER, "level": "info", "message": message, "payload": payload }),
            )
            .await;
        assert_eq!(status, 200, "{event}");
        event
    }

    async fn upload(&self, id: &str, name: &str, bytes: &[u8], digest: &str) -> (u16, Value) {
        let form = Form::new()
            .text("workerId", WORKER)
            .text("name", name.to_string())
            .text("digest", digest.to_string())
            .part("file", Part::bytes(bytes.to_vec()).file_name("step.log"));
        let response = self
            .http
            .post(format!(
                "{}/api/queue/jobs/{id}/artifacts/upload",
                self.base
            ))
            .header("X-MoonMind-Worker-Token", &self.token)
            .multipart(form)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }
}

async fn seed_worker(server: &TestServer) -> SeedWorker {
    SeedWorker {
        http: reqwest::Client::new(),
        base: server.url(),
        token: server.token(WORKER, TokenKind::Worker, None).await,
    }
}

async fn submit(server: &TestServer) -> String {
    let operator = server.user(Role::Operator).await;
    let job = operator
        .create_job(&json!({ "payload": {
            "repository": "octo/repo",
            "task": {
                "instructions": "Fix the bug",
                "runtime": { "mode": "codex" },
                "publish": { "mode": "none" },
            },
        }}))
        .await
        .unwrap();
    job.id.to_string()
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn the_seed_worker_claims_heartbeats_reports_uploads_and_completes() {
    let server = start().await;
    let seed = seed_worker(&server).await;
    let id = submit(&server).await;
    let job = seed.claim().await;
    assert_eq!(job["id"], id.as_str());
    assert_eq!(job["claimedBy"], WORKER);

    let (status, beat) = seed
        .post(
            &format!("/jobs/{id}/heartbeat"),
            json!({ "workerId": WORKER, "leaseSeconds": 60 }),
        )
        .await;
    assert_eq!((status, &beat["attempt"]), (200, &json!(1)), "{beat}");

    let plan = seed
        .event(
            &id,
            "task.steps.plan",
            json!({ "count": 1, "stepIds": ["step-1"] }),
        )
        .await;
    assert_eq!(plan["kind"], "task.steps.plan");
    let started = seed
        .event(
            &id,
            "task.step.started",
            json!({ "stepIndex": 0, "stepId": "step-1", "effectiveSkill": "auto" }),
        )
        .await;
    assert_eq!(started["kind"], "task.step.started");
    let free = seed.event(&id, "Cloning octo/repo", json!({})).await;
    assert_eq!(
        (free["kind"].as_str(), free["message"].as_str()),
        (Some("task.message"), Some("Cloning octo/repo"))
    );

    let log = b"step 1 output\n";
    let (status, artifact) = seed
        .upload(
            &id,
            "logs/steps/step-0000.log",
            log,
            &format!("sha256:{}", sha256(log)),
        )
        .await;
    assert_eq!(status, 201, "{artifact}");
    assert_eq!(artifact["name"], "logs/steps/step-0000.log");
    // A digest that is not the file's: the upload is refused, naming the field.
    let (status, error) = seed
        .upload(
            &id,
            "logs/other.log",
            log,
            &format!("sha256:{}", sha256(b"else")),
        )
        .await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["errors"][0]["path"], "digest");
    assert!(
        error["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("send it again"),
        "{error}"
    );
    let (status, error) = seed.upload(&id, "logs/other.log", log, "md5:abc").await;
    assert_eq!(
        (status, &error["errors"][0]["path"]),
        (422, &json!("digest"))
    );

    let (status, done) = seed
        .post(
            &format!("/jobs/{id}/complete"),
            json!({ "workerId": WORKER, "resultSummary": "1 step, done" }),
        )
        .await;
    assert_eq!(
        (status, &done["status"]),
        (200, &json!("succeeded")),
        "{done}"
    );

    let operator = server.user(Role::Viewer).await;
    let artifacts = operator.list_artifacts(&id.parse().unwrap()).await.unwrap();
    assert_eq!(
        artifacts
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>(),
        ["logs/steps/step-0000.log"]
    );
    let kinds: Vec<String> = operator
        .list_events(&id.parse().unwrap(), None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    for kind in [
        "task.steps.plan",
        "task.step.started",
        "task.message",
        "job.completed",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} not in {kinds:?}");
    }
}

#[tokio::test]
async fn the_seed_worker_fails_a_job_and_acknowledges_a_cancel() {
    let server = start().await;
    let seed = seed_worker(&server).await;
    let failed = submit(&server).await;
    seed.claim().await;
    let (status, job) = seed
        .post(
            &format!("/jobs/{failed}/fail"),
            json!({ "workerId": WORKER, "errorMessage": "clone failed", "retryable": false }),
        )
        .await;
    assert_eq!((status, &job["status"]), (200, &json!("failed")), "{job}");

    let cancelled = submit(&server).await;
    seed.claim().await;
    let operator = server.user(Role::Operator).await;
    operator
        .cancel_job(&cancelled.parse().unwrap(), Some("wrong repo"))
        .await
        .unwrap();
    let (status, job) = seed
        .post(
            &format!("/jobs/{cancelled}/cancel/ack"),
            json!({ "workerId": WORKER }),
        )
        .await;
    assert_eq!(
        (status, &job["status"]),
        (200, &json!("cancelled")),
        "{job}"
    );
    // Ended: a further write names the state.
    let (status, error) = seed
        .post(
            &format!("/jobs/{cancelled}/heartbeat"),
            json!({ "workerId": WORKER }),
        )
        .await;
    assert_eq!(
        (status, &error["code"]),
        (409, &json!("job_state_conflict"))
    );
}

#[tokio::test]
async fn the_seed_header_takes_worker_tokens_only() {
    let server = start().await;
    let id = submit(&server).await;
    let user = SeedWorker {
        http: reqwest::Client::new(),
        base: server.url(),
        token: server
            .token("alice", TokenKind::User, Some(Role::Admin))
            .await,
    };
    let (status, error) = user
        .post("/jobs/claim", json!({ "workerId": "alice" }))
        .await;
    assert_eq!(
        (status, &error["code"]),
        (403, &json!("worker_not_authorized"))
    );
    let stranger = SeedWorker {
        token: format!("sww_{}", "0".repeat(64)),
        ..user
    };
    let (status, error) = stranger
        .post(
            &format!("/jobs/{id}/heartbeat"),
            json!({ "workerId": WORKER }),
        )
        .await;
    assert_eq!(
        (status, &error["code"]),
        (401, &json!("worker_auth_failed"))
    );
    // Another worker naming no attempt cannot write for the lease the first one holds.
    let seed = seed_worker(&server).await;
    seed.claim().await;
    let other = SeedWorker {
        http: reqwest::Client::new(),
        base: server.url(),
        token: server.token("other", TokenKind::Worker, None).await,
    };
    let (status, error) = other.post(&format!("/jobs/{id}/complete"), json!({})).await;
    assert_eq!(
        (status, &error["code"]),
        (409, &json!("job_ownership_mismatch"))
    );
}
