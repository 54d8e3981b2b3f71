//! A live site for the hostile tests that need jobs to really run: the real router (REST
//! API and pages) on a real socket, over SQLite or a scratch PostgreSQL database, with the
//! real worker claim loop and the scripted agent.

use std::future::IntoFuture;
use std::path::Path;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use contract::Job;
use queue::{Role, TokenKind};
use serde_json::Value;
use tokio::task::JoinHandle;
use worker::client::QueueClient;
use worker::runner::{Shutdown, WorkerConfig};

use stepwise::http::auth::{Scope, mint};
use stepwise::testing::site::{Backend, TestDb, send, session_cookie, test_site_on};

/// One test's server. Fields drop in order: workers and the socket go before the database.
pub struct LiveSite {
    workers: Vec<Shutdown>,
    server: JoinHandle<()>,
    pub backend: Backend,
    pub router: axum::Router,
    pub queue: queue::Queue,
    pub url: String,
    /// An operator's client, and the same token for raw requests.
    pub user: QueueClient,
    user_token: String,
    /// A logged-in admin's `Cookie` header, for the pages.
    cookie: String,
    db: TestDb,
    /// The site root; the data directory (SQLite file, artifacts) is `data` inside.
    pub dir: tempfile::TempDir,
}

impl Drop for LiveSite {
    fn drop(&mut self) {
        for worker in &self.workers {
            worker.stop.cancel();
            worker.hand_back.cancel();
        }
        self.server.abort();
    }
}

impl LiveSite {
    pub async fn start(backend: Backend) -> LiveSite {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(backend).await;
        let (router, queue) = test_site_on(dir.path(), "none", db.url.as_deref()).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn({
            let router = router.clone();
            async move {
                let _ = axum::serve(listener, router).into_future().await;
            }
        });
        let cookie = session_cookie(&queue).await;
        let user_token = token(
            &queue,
            "operator",
            TokenKind::User,
            Scope::user(Role::Operator),
        )
        .await;
        let user = QueueClient::new(&url, &user_token).unwrap();
        LiveSite {
            workers: Vec::new(),
            server,
            backend,
            router,
            queue,
            url,
            user,
            user_token,
            cookie,
            db,
            dir,
        }
    }

    /// Starts the real claim loop against this site with `config`, under a worker token.
    pub async fn start_worker(&mut self, name: &str, config: WorkerConfig) {
        let secret = token(&self.queue, name, TokenKind::Worker, Scope::any_worker()).await;
        let client = QueueClient::new(&self.url, &secret).unwrap();
        let shutdown = Shutdown::default();
        tokio::spawn(worker::runner::run(client, config, shutdown.clone()));
        self.workers.push(shutdown);
    }

    /// Creates a job from `request` (`{"payload": …}` and the envelope's fields).
    pub async fn submit(&self, request: &Value) -> Job {
        self.user.create_job(request).await.unwrap()
    }

    /// The job once it has ended, within `within`.
    pub async fn ended(&self, job: &Job, within: Duration) -> Job {
        let deadline = Instant::now() + within;
        loop {
            let current = self.user.get_job(&job.id).await.unwrap();
            if current.status.is_terminal() {
                return current;
            }
            assert!(
                Instant::now() < deadline,
                "{:?}: job {} never ended: {current:?}",
                self.backend,
                job.id
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A REST answer as the bytes came, read with the operator's token; a non-2xx fails.
    pub async fn api(&self, uri: &str) -> String {
        let request = Request::get(uri)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.user_token))
            .body(Body::empty())
            .unwrap();
        let (status, _, body) = send(&self.router, request).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{:?} GET {uri}: {body}",
            self.backend
        );
        body
    }

    /// A page as a logged-in admin's browser gets it; a non-2xx fails.
    pub async fn page(&self, uri: &str) -> String {
        let request = Request::get(uri)
            .header(header::COOKIE, &self.cookie)
            .body(Body::empty())
            .unwrap();
        let (status, _, html) = send(&self.router, request).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{:?} GET {uri}: {html}",
            self.backend
        );
        html
    }

    /// Every event of a job, as the API's pages of JSON (oldest first).
    pub async fn events(&self, id: &str) -> Vec<String> {
        let mut pages = Vec::new();
        let mut after = 0i64;
        loop {
            let page = self
                .api(&format!(
                    "/api/queue/jobs/{id}/events?after={after}&limit=200"
                ))
                .await;
            let items: Value = serde_json::from_str(&page).unwrap();
            let last = items["items"]
                .as_array()
                .unwrap()
                .last()
                .map(|e| e["id"].as_i64().unwrap());
            pages.push(page);
            match last {
                Some(id) => after = id,
                None => return pages,
            }
        }
    }

    /// Everything this site keeps at rest, as (where, bytes): each file under the data
    /// directory (the SQLite database and its WAL, the artifacts), and for PostgreSQL a
    /// data-only dump of the scratch database with its bytea values decoded.
    pub fn stored(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        files(&self.dir.path().join("data"), &mut out);
        if let Some(url) = &self.db.url {
            // sqlx's own settings ride in the query, which libpq refuses.
            let url = url.split('?').next().unwrap_or(url);
            let dump = std::process::Command::new("pg_dump")
                .args(["--data-only", "--no-owner", "--dbname", url])
                .output()
                .expect("pg_dump runs");
            assert!(
                dump.status.success(),
                "pg_dump: {}",
                String::from_utf8_lossy(&dump.stderr)
            );
            let text = String::from_utf8_lossy(&dump.stdout).into_owned();
            let decoded = decode_bytea(&text);
            out.push(("pg_dump".into(), dump.stdout));
            out.push(("pg_dump (bytea decoded)".into(), decoded));
        }
        out
    }
}

async fn token(queue: &queue::Queue, name: &str, kind: TokenKind, scope: Scope) -> String {
    let minted = mint(name, kind, scope).unwrap();
    queue.create_token(minted.record).await.unwrap();
    minted.secret
}

fn files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
}

/// The bytes of every `\x…` hex literal in a dump (how COPY writes bytea).
fn decode_bytea(dump: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for literal in dump.split("\\x").skip(1) {
        let hex: String = literal
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        if let Ok(bytes) = hex::decode(&hex[..hex.len() - hex.len() % 2]) {
            out.extend(bytes);
            out.push(b'\n');
        }
    }
    out
}
