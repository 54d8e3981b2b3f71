//! The whole site (API, login, pages, server functions) over a throw-away database, as
//! `stepwise serve` builds it, and the requests the tests send it.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::cli::config::{Config, ServeArgs};
use crate::cli::db::{DbArgs, open_queue};
use crate::cli::defaults::DefaultsArgs;
use crate::cli::worker::AgentArgs;
use crate::http::Limits;
use crate::http::auth::{Scope, bootstrap_admin, hash, mint};
use crate::http::session::COOKIE_NAME;
use crate::http::site::router;

/// The whole router over a fresh SQLite database in `site`, and its queue.
pub async fn test_site(site: &std::path::Path, publish: &'static str) -> (Router, queue::Queue) {
    test_site_on(site, publish, None).await
}

/// Which database a test site runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A throw-away database of `backend` for one test: the SQLite file lives in the site;
/// a PostgreSQL one is created on the server of `STEPWISE_TEST_PG_URL` and dropped when
/// this is (on failure too).
pub struct TestDb {
    pub url: Option<String>,
    pg: Option<queue::ScratchPostgres>,
}

impl TestDb {
    pub async fn new(backend: Backend) -> TestDb {
        match backend {
            Backend::Sqlite => TestDb {
                url: None,
                pg: None,
            },
            Backend::Postgres => {
                let admin = std::env::var("STEPWISE_TEST_PG_URL")
                    .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
                let pg = queue::ScratchPostgres::create(&admin, "stepwise_srv")
                    .await
                    .unwrap_or_else(|e| {
                        panic!("PostgreSQL at STEPWISE_TEST_PG_URL is needed: {e}")
                    });
                TestDb {
                    url: Some(pg.url().to_string()),
                    pg: Some(pg),
                }
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(pg) = self.pg.take() {
            // Drop runs inside a runtime in tests; a thread of its own may block.
            let _ = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                if let Err(e) = runtime.block_on(pg.drop_database()) {
                    eprintln!("could not drop a test database: {e}");
                }
            })
            .join();
        }
    }
}

/// [`test_site`] on the database at `database_url` (SQLite in the site when `None`).
pub async fn test_site_on(
    site: &std::path::Path,
    publish: &'static str,
    database_url: Option<&str>,
) -> (Router, queue::Queue) {
    test_site_with(site, publish, database_url, Limits::default()).await
}

/// [`test_site_on`] with the API's bounds set by the test.
pub async fn test_site_with(
    site: &std::path::Path,
    publish: &'static str,
    database_url: Option<&str>,
    limits: Limits,
) -> (Router, queue::Queue) {
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let args = ServeArgs {
        host: "127.0.0.1".into(),
        port: 0,
        db: DbArgs {
            data_dir: site.join("data"),
            database_url: database_url.map(str::to_string),
        },
        site_root: Some(site.to_path_buf()),
        no_worker: true,
        worker: AgentArgs::defaults(),
        defaults: DefaultsArgs::from_flags(&["--default-publish-mode", publish]).unwrap(),
        max_running_per_repository: 1,
        notify: Default::default(),
        retention: Default::default(),
        github: Default::default(),
    };
    let config = Config::load(args, |_| None).unwrap();
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new(None));
    let queue = open_queue(&config.db, config.queue_settings(vec![metrics.clone()]))
        .await
        .unwrap();
    (
        {
            let state = crate::http::AppState {
                queue: queue.clone(),
                limits,
                closing: CancellationToken::new(),
                metrics,
                github: Some(std::sync::Arc::new(
                    crate::http::GitHubHook::new(
                        super::GITHUB_WEBHOOK_SECRET.into(),
                        std::sync::Arc::new(tokio::sync::Notify::new()),
                    )
                    .with_intake(Some(any_author_intake(site))),
                )),
            };
            router(&config.site(), state.clone(), crate::mcp::router(state))
        },
        queue,
    )
}

/// A job created from `raw` and claimed by `worker` (the only queued job, so the one
/// claimed), and the fence its worker writes with.
pub async fn claimed_job(
    queue: &queue::Queue,
    raw: &serde_json::Value,
    worker: &str,
) -> (contract::Job, queue::Fence) {
    let job = queue.create_job(raw, Some("admin")).await.unwrap();
    let request = queue::ClaimRequest {
        worker_id: worker.into(),
        capabilities: vec!["codex".into(), "claude".into(), "git".into(), "gh".into()],
        allowed_types: None,
        allowed_repositories: None,
        lease: Duration::from_secs(600),
        max_running_per_repository: None,
    };
    let claimed = queue.claim(&request).await.unwrap().expect("the job");
    assert_eq!(claimed.id, job.id, "one job queued at a time");
    let fence = queue::Fence::of(&claimed).unwrap();
    (job, fence)
}

/// A `Cookie` header of a live session of a fresh admin token.
pub async fn session_cookie(queue: &queue::Queue) -> String {
    let admin = bootstrap_admin(queue).await.unwrap();
    let token = match admin {
        Some(secret) => queue
            .find_token_by_hash(&hash(&secret))
            .await
            .unwrap()
            .unwrap(),
        None => queue.list_tokens().await.unwrap().remove(0),
    };
    let secret = format!("sws_{}", "ab".repeat(32));
    queue
        .create_session(
            &token.id,
            queue::SessionPurpose::Session,
            &hash(&secret),
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap();
    format!("{}={secret}", COOKIE_NAME)
}

pub async fn send(
    app: &Router,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// A logged-in GET.
pub async fn get(
    app: &Router,
    cookie: &str,
    uri: &str,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let request = Request::get(uri)
        .header(header::COOKIE, cookie)
        .body(Body::empty())
        .unwrap();
    send(app, request).await
}

/// A `Cookie` header of a live session of a fresh user token with `role`.
pub async fn session_as(queue: &queue::Queue, role: queue::Role) -> String {
    let minted = mint(
        &format!("{}-{}", role.as_str(), uuid_ish()),
        queue::TokenKind::User,
        Scope::user(role),
    )
    .unwrap();
    let token = queue.create_token(minted.record).await.unwrap();
    let secret = format!("sws_{}", uuid_ish());
    queue
        .create_session(
            &token.id,
            queue::SessionPurpose::Session,
            &hash(&secret),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    format!("{}={secret}", COOKIE_NAME)
}

fn uuid_ish() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{:032x}", N.fetch_add(1, Ordering::SeqCst) + 0xabc0_0000)
}

/// The URL of the server function named `name` (`cancel_job`, …).
pub fn server_fn_url(name: &str) -> String {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path)
        .find(|path| {
            path.strip_prefix(app::SERVER_FN_PREFIX)
                .is_some_and(|rest| rest.starts_with(name))
        })
        .unwrap_or_else(|| panic!("no server function {name}"))
        .to_string()
}

/// A server function called as the browser's scripts call it (a form-encoded POST).
pub async fn call_server_fn(
    app: &Router,
    cookie: &str,
    name: &str,
    form: &str,
) -> (StatusCode, String) {
    let request = Request::post(server_fn_url(name))
        .header(header::COOKIE, cookie)
        .header(header::HOST, "localhost")
        .header(header::ORIGIN, "http://localhost")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, "application/json")
        .body(Body::from(form.to_string()))
        .unwrap();
    let (status, _, body) = send(app, request).await;
    (status, body)
}

/// An intake whose rule hears anyone in `octo/*`, so the site's GitHub deliveries reach
/// as far as a job; its API is an address nothing answers at.
fn any_author_intake(site: &std::path::Path) -> std::sync::Arc<crate::github::intake::Intake> {
    let rules = site.join("github-rules.json");
    let file = serde_json::json!({ "rules": [{
        "repositories": ["octo/*"],
        "label": "stepwise",
        "mention": "@stepwise",
        "authors": "anyone",
        "job": { "payload": { "task": { "steps": [{ "instructions": "Do it" }] } } },
    }] });
    std::fs::write(&rules, file.to_string()).unwrap();
    std::sync::Arc::new(crate::github::intake::Intake::new(
        crate::github::rules::RulesFile::open(&rules).unwrap(),
        crate::github::api::GitHubApi::new("http://127.0.0.1:9", Duration::from_millis(200)),
        "not-a-token".into(),
        "https://github.com/".into(),
        std::sync::Arc::new(tokio::sync::Notify::new()),
    ))
}
