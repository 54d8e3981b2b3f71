//! Hostile input as part of the suite, on both backends: generated garbage and hostile text
//! sent to every route, server function, page and MCP tool (the server must not answer 5xx, must
//! refuse in the API's error shape, must never let text become markup), secrets seeded
//! through every path a worker writes, and NUL bytes in what an agent prints.

mod garbage;
mod live;
mod mcp;
mod nul;
mod pages;
mod routes;
mod secrets;

use std::future::IntoFuture;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use queue::{Role, TokenKind};

use stepwise::http::Limits;
use stepwise::testing::site::{Backend, TestDb, claimed_job, session_as, test_site_with};

/// How many generated requests each route gets; `STEPWISE_HOSTILE_CASES` raises it for a
/// longer hunt (the figure CI runs is small enough to keep the suite in seconds).
pub fn cases() -> usize {
    std::env::var("STEPWISE_HOSTILE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

/// A whole site (API, login, pages, server functions) on a fresh database of one backend,
/// with a token of every kind, and one job that a worker claimed and gave an artifact, so
/// that routes which need a real id reach their deepest code.
pub struct Site {
    pub backend: Backend,
    /// The router on a real socket: requests go through hyper as a client's would, so a
    /// dropped connection is seen as one.
    url: String,
    client: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
    pub queue: queue::Queue,
    pub admin: String,
    pub viewer: String,
    pub worker: String,
    pub admin_cookie: String,
    pub viewer_cookie: String,
    pub job_id: String,
    pub artifact_id: String,
    _db: TestDb,
    _dir: tempfile::TempDir,
}

impl Site {
    pub async fn start(backend: Backend) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(backend).await;
        // A claim with no job waits this long at most: generated claims must not stall.
        let limits = Limits {
            max_claim_wait: Duration::from_millis(200),
            keep_alive: Duration::from_secs(1),
            ..Limits::default()
        };
        let (app, queue) = test_site_with(dir.path(), "none", db.url.as_deref(), limits).await;
        let token = |name: &str, kind, role| {
            let scope = stepwise::http::auth::Scope {
                role,
                capabilities: None,
                allowed_repositories: None,
                allowed_job_types: None,
            };
            let minted = stepwise::http::auth::mint(name, kind, scope).unwrap();
            let queue = queue.clone();
            async move {
                queue.create_token(minted.record).await.unwrap();
                minted.secret
            }
        };
        let admin = token("admin", TokenKind::User, Some(Role::Admin)).await;
        let viewer = token("viewer", TokenKind::User, Some(Role::Viewer)).await;
        let worker = token("worker", TokenKind::Worker, None).await;
        let admin_cookie = session_as(&queue, Role::Admin).await;
        let viewer_cookie = session_as(&queue, Role::Viewer).await;
        let raw = serde_json::json!({
            "payload": { "repository": "octo/repo", "task": { "instructions": "Fix it" } }
        });
        let (job, fence) = claimed_job(&queue, &raw, "w1").await;
        let artifact = queue
            .add_artifact(&job.id, &fence, "logs/step-1.log", "text/plain", b"hello\n")
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).into_future().await;
        });
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Site {
            backend,
            url,
            client,
            server,
            queue,
            admin,
            viewer,
            worker,
            admin_cookie,
            viewer_cookie,
            job_id: job.id.to_string(),
            artifact_id: artifact.id,
            _db: db,
            _dir: dir,
        }
    }

    /// One request through the socket. An event stream that opened is not read (it would
    /// not end); everything else is read whole.
    pub async fn send(&self, request: Request<Body>) -> Answer {
        self.send_reading(request, false).await
    }

    /// [`send`](Self::send), reading an event stream too: MCP answers a POST with one that
    /// ends after the answer.
    pub async fn send_all(&self, request: Request<Body>) -> Answer {
        self.send_reading(request, true).await
    }

    async fn send_reading(&self, request: Request<Body>, streams: bool) -> Answer {
        let what = format!("{} {}", request.method(), request.uri());
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let sent = self
            .client
            .request(parts.method, format!("{}{}", self.url, parts.uri))
            .headers(parts.headers)
            .body(body)
            .timeout(Duration::from_secs(30))
            .send();
        let backend = self.backend;
        let response = sent
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {what} got no answer: {e:?}"));
        let status = response.status();
        let headers = response.headers().clone();
        let streaming = headers
            .get(axum::http::header::CONTENT_TYPE)
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
        let body = if streaming && !streams {
            String::new()
        } else {
            let bytes = response
                .bytes()
                .await
                .unwrap_or_else(|e| panic!("{backend:?}: {what}: the answer broke off: {e:?}"));
            String::from_utf8_lossy(&bytes).into_owned()
        };
        Answer {
            what,
            status,
            headers,
            body,
        }
    }

    /// The site still serves a plain read after whatever came before.
    pub async fn assert_alive(&self) {
        let request = Request::get("/api/queue/jobs")
            .header("authorization", format!("Bearer {}", self.admin))
            .body(Body::empty())
            .unwrap();
        let answer = self.send(request).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer}");
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// What came back for one request, with the request named for the failure message.
pub struct Answer {
    pub what: String,
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut body = self.body.clone();
        if body.len() > 600 {
            body.truncate(body.floor_char_boundary(600));
            body.push('…');
        }
        write!(f, "{} → {}: {body}", self.what, self.status)
    }
}

impl Answer {
    /// No answer to anything a client sends is a server error; a refusal is the API's
    /// `ErrorBody` whose code gives the status, and a 422 names each field it refuses.
    pub fn check_refusal(&self, backend: Backend) {
        assert!(
            !self.status.is_server_error(),
            "{backend:?}: a server error for client input: {self}"
        );
        if !self.status.is_client_error() {
            return;
        }
        let error: contract::api::ErrorBody =
            serde_json::from_str(&self.body).unwrap_or_else(|e| {
                panic!("{backend:?}: a refusal not in the API's shape ({e}): {self}")
            });
        let code = contract::api::ErrorCode::parse(&error.code)
            .unwrap_or_else(|| panic!("{backend:?}: an unknown error code: {self}"));
        assert_eq!(code.status(), self.status.as_u16(), "{backend:?}: {self}");
        assert!(!error.message.trim().is_empty(), "{backend:?}: {self}");
        if code == contract::api::ErrorCode::InvalidQueuePayload {
            assert!(
                !error.errors.is_empty()
                    && error.errors.iter().all(|e| !e.message.trim().is_empty()),
                "{backend:?}: a 422 must name each refused field: {self}"
            );
        }
    }
}
