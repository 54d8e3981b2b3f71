//! The probes: `/healthz` and `/readyz` on the whole site (outside the login gate, with no
//! token) on both backends, and on `stepwise worker --health-port`, run for real.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use queue::Database;
use serde_json::{Value, json};
use stepwise::testing::site::{Backend, TestDb, send, test_site_on};

/// Deletes migration 8's record, as an operator restoring an old backup would leave it.
async fn forget_migration_8(queue: &queue::Queue) {
    let sql = "DELETE FROM _sqlx_migrations WHERE version = 8";
    match queue.database() {
        Database::Sqlite(db) => sqlx::query(sql).execute(db.pool()).await.map(drop),
        Database::Postgres(db) => sqlx::query(sql).execute(db.pool()).await.map(drop),
    }
    .unwrap();
}

async fn probe(app: &axum::Router, path: &str) -> (StatusCode, axum::http::HeaderMap, Value) {
    let request = Request::get(path).body(Body::empty()).unwrap();
    let (status, headers, body) = send(app, request).await;
    let body = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (status, headers, body)
}

async fn probes_answer_without_a_token(backend: Backend) {
    let site = tempfile::tempdir().unwrap();
    let db = TestDb::new(backend).await;
    let (app, queue) = test_site_on(site.path(), "none", db.url.as_deref()).await;
    let (status, headers, body) = probe(&app, "/healthz").await;
    assert_eq!((status, body), (StatusCode::OK, json!({ "status": "ok" })));
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    let (status, _, body) = probe(&app, "/readyz").await;
    assert_eq!((status, body), (StatusCode::OK, json!({ "status": "ok" })));

    forget_migration_8(&queue).await;
    let (status, _, body) = probe(&app, "/readyz").await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{backend:?}: {body}"
    );
    assert_eq!(body["status"], "unavailable");
    let reason = body["reason"].as_str().unwrap();
    assert!(
        reason.contains("migration 8 (pause and resume) is not applied")
            && reason.contains("stepwise migrate"),
        "{backend:?}: {reason}"
    );
    // The process is still up: only readiness follows the database.
    let (status, _, _) = probe(&app, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn probes_answer_without_a_token_and_readyz_names_a_missing_migration_on_sqlite() {
    probes_answer_without_a_token(Backend::Sqlite).await;
}

#[tokio::test]
async fn probes_answer_without_a_token_and_readyz_names_a_missing_migration_on_postgres() {
    probes_answer_without_a_token(Backend::Postgres).await;
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn get(url: &str) -> Option<(u16, Value)> {
    let response = reqwest::get(url).await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.ok()?))
}

#[tokio::test]
async fn a_worker_s_readiness_follows_its_servers() {
    let server = stepwise::testing::server::start().await;
    let token = server.token("probed", queue::TokenKind::Worker, None).await;
    let work = tempfile::tempdir().unwrap();
    let (port, dead) = (free_port(), free_port());
    let _worker = Killed(
        Command::new(env!("CARGO_BIN_EXE_stepwise"))
            .args(["worker", "--capability", "git", "--health-port"])
            .arg(port.to_string())
            .arg("--server")
            .arg(format!("{},http://127.0.0.1:{dead}", server.url()))
            .arg("--workdir")
            .arg(work.path())
            .env("STEPWISE_WORKER_TOKEN", &token)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let probes = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let health = loop {
        if let Some(answer) = get(&format!("{probes}/healthz")).await {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "the worker's probes never answered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(health, (200, json!({ "status": "ok" })));
    // The first server is ready, so the worker is, though the second cannot be reached.
    let ready = get(&format!("{probes}/readyz")).await.unwrap();
    assert_eq!(ready, (200, json!({ "status": "ok" })));

    forget_migration_8(server.queue()).await;
    let (status, body) = get(&format!("{probes}/readyz")).await.unwrap();
    assert_eq!(status, 503, "{body}");
    let reason = body["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "the server at {}/ is not ready: migration 8",
            server.url()
        )),
        "{reason}"
    );
    assert!(
        reason.contains(&format!(
            "cannot reach the stepwise server at http://127.0.0.1:{dead}/readyz"
        )),
        "{reason}"
    );
    assert!(!reason.contains(&token), "{reason}");
    let (status, _) = get(&format!("{probes}/healthz")).await.unwrap();
    assert_eq!(status, 200);
}
