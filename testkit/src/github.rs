//! A scripted GitHub REST API for tests: pull requests, check runs with their logs (as
//! GitHub Actions serves them, by a redirect to the text), reviews and their line comments,
//! in GitHub's documented shapes; and webhook deliveries signed as GitHub signs them
//! (`X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>`). It answers only a caller
//! that sends its token, and records every request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// A pull request as the script holds it.
#[derive(Debug, Clone)]
struct Pull {
    owner: String,
    repo: String,
    number: u64,
    head_ref: String,
    head_sha: String,
    state: &'static str,
}

#[derive(Debug, Clone)]
struct CheckRun {
    id: u64,
    head_sha: String,
    name: String,
    conclusion: Option<String>,
    log: String,
}

#[derive(Debug, Clone)]
struct Review {
    id: u64,
    number: u64,
    user: String,
    association: String,
    state: String,
    body: String,
    commit_id: String,
    comments: Vec<(u64, String, u64, String)>,
}

#[derive(Default)]
struct Script {
    token: String,
    next_id: u64,
    pulls: Vec<Pull>,
    checks: Vec<CheckRun>,
    reviews: Vec<Review>,
    requests: Vec<String>,
}

impl Script {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        4_000_000 + self.next_id
    }
}

type Shared = Arc<Mutex<Script>>;

/// The running API; it stops when dropped.
pub struct GitHub {
    addr: SocketAddr,
    script: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GitHub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A webhook delivery as GitHub sends it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl GitHub {
    /// Listens on a free port of 127.0.0.1, answering callers that send `token`.
    pub async fn start(token: &str) -> GitHub {
        let script: Shared = Arc::new(Mutex::new(Script {
            token: token.to_string(),
            ..Script::default()
        }));
        let app = Router::new()
            .route("/repos/{owner}/{repo}/pulls/{number}", get(pull))
            .route(
                "/repos/{owner}/{repo}/commits/{sha}/check-runs",
                get(check_runs),
            )
            .route(
                "/repos/{owner}/{repo}/actions/jobs/{id}/logs",
                get(job_logs),
            )
            .route("/repos/{owner}/{repo}/pulls/{number}/reviews", get(reviews))
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/reviews/{id}/comments",
                get(review_comments),
            )
            .route("/download/logs/{id}", get(log_text))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("a bound address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        GitHub { addr, script, task }
    }

    /// The API's base URL (GitHub's is `https://api.github.com`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Script) -> T) -> T {
        f(&mut self.script.lock().expect("not poisoned"))
    }

    /// Opens pull request `owner/repo#number` of branch `head_ref` at `head_sha`.
    pub fn open_pull(&self, owner: &str, repo: &str, number: u64, head_ref: &str, head_sha: &str) {
        self.with(|s| {
            s.pulls.retain(|p| p.number != number);
            s.pulls.push(Pull {
                owner: owner.into(),
                repo: repo.into(),
                number,
                head_ref: head_ref.into(),
                head_sha: head_sha.into(),
                state: "open",
            })
        });
    }

    /// The pull request's head moved (a push to its branch).
    pub fn set_head(&self, number: u64, head_sha: &str) {
        self.with(|s| {
            for pull in s.pulls.iter_mut().filter(|p| p.number == number) {
                pull.head_sha = head_sha.into();
            }
        });
    }

    /// A check run of `head_sha`, completed with `conclusion` (`success`, `failure`, …) or
    /// still running (`None`), whose log (GitHub Actions') is `log`. Its id.
    pub fn add_check_run(
        &self,
        head_sha: &str,
        name: &str,
        conclusion: Option<&str>,
        log: &str,
    ) -> u64 {
        self.with(|s| {
            let id = s.id();
            s.checks.push(CheckRun {
                id,
                head_sha: head_sha.into(),
                name: name.into(),
                conclusion: conclusion.map(str::to_string),
                log: log.into(),
            });
            id
        })
    }

    /// A review of pull request `number` by `user`: `state` as the REST API spells it
    /// (`CHANGES_REQUESTED`, `APPROVED`, `COMMENTED`), with line comments `(path, line,
    /// body)`. Its id.
    pub fn add_review(
        &self,
        number: u64,
        user: &str,
        state: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        self.add_review_by(number, user, "COLLABORATOR", state, body, comments)
    }

    /// [`add_review`](Self::add_review) by a reviewer of `association` to the repository
    /// (`OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`).
    pub fn add_review_by(
        &self,
        number: u64,
        user: &str,
        association: &str,
        state: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        self.with(|s| {
            let id = s.id();
            let commit_id = s
                .pulls
                .iter()
                .find(|p| p.number == number)
                .map(|p| p.head_sha.clone())
                .unwrap_or_default();
            let comments = comments
                .iter()
                .map(|(path, line, body)| (s.id(), path.to_string(), *line, body.to_string()))
                .collect();
            s.reviews.push(Review {
                id,
                number,
                user: user.into(),
                association: association.into(),
                state: state.into(),
                body: body.into(),
                commit_id,
                comments,
            });
            id
        })
    }

    /// Every request so far: `METHOD path`, in order.
    pub fn requests(&self) -> Vec<String> {
        self.with(|s| s.requests.clone())
    }

    /// The `check_run` webhook's payload for check run `id` (action `completed`).
    pub fn check_run_event(&self, id: u64) -> Value {
        self.with(|s| {
            let run = s.checks.iter().find(|c| c.id == id).expect("a check run");
            let pulls: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| p.head_sha == run.head_sha)
                .map(pull_ref)
                .collect();
            let repository = s.pulls.first().map(repository).unwrap_or(Value::Null);
            let mut body = check_run(run);
            body.insert("pull_requests".into(), Value::Array(pulls));
            json!({
                "action": "completed",
                "check_run": body,
                "repository": repository,
                "sender": { "login": "github-actions[bot]", "type": "Bot" },
            })
        })
    }

    /// The `pull_request_review` webhook's payload for review `id` (action `submitted`):
    /// the review's state is lowercase here, as webhooks send it.
    pub fn review_event(&self, id: u64) -> Value {
        self.with(|s| {
            let review = s.reviews.iter().find(|r| r.id == id).expect("a review");
            let pull = s
                .pulls
                .iter()
                .find(|p| p.number == review.number)
                .expect("its pull request");
            let mut body = review_json(review, pull);
            body["state"] = json!(review.state.to_ascii_lowercase());
            json!({
                "action": "submitted",
                "review": body,
                "pull_request": pull_json(pull),
                "repository": repository(pull),
                "sender": { "login": review.user, "type": "User" },
            })
        })
    }
}

/// `event`'s delivery with `payload`, signed with `secret` as GitHub signs it.
pub fn delivery(event: &str, id: &str, payload: &Value, secret: &str) -> Delivery {
    let body = serde_json::to_vec(payload).expect("JSON");
    let signature = signature(secret, &body);
    Delivery {
        headers: vec![
            ("X-GitHub-Event".into(), event.into()),
            ("X-GitHub-Delivery".into(), id.into()),
            ("X-Hub-Signature-256".into(), signature),
            ("User-Agent".into(), "GitHub-Hookshot/044aadd".into()),
            ("Content-Type".into(), "application/json".into()),
        ],
        body,
    }
}

/// `X-Hub-Signature-256`'s value for `body`: `sha256=` and the hex of its HMAC-SHA256.
pub fn signature(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn repository(pull: &Pull) -> Value {
    json!({
        "name": pull.repo,
        "full_name": format!("{}/{}", pull.owner, pull.repo),
        "owner": { "login": pull.owner },
        "html_url": format!("https://github.com/{}/{}", pull.owner, pull.repo),
    })
}

fn pull_ref(pull: &Pull) -> Value {
    json!({
        "number": pull.number,
        "head": { "ref": pull.head_ref, "sha": pull.head_sha },
        "base": { "ref": "main" },
    })
}

fn pull_json(pull: &Pull) -> Value {
    json!({
        "number": pull.number,
        "state": pull.state,
        "merged": false,
        "html_url": format!("https://github.com/{}/{}/pull/{}", pull.owner, pull.repo, pull.number),
        "head": { "ref": pull.head_ref, "sha": pull.head_sha },
        "base": { "ref": "main" },
    })
}

fn check_run(run: &CheckRun) -> serde_json::Map<String, Value> {
    let status = if run.conclusion.is_some() {
        "completed"
    } else {
        "in_progress"
    };
    json!({
        "id": run.id,
        "name": run.name,
        "head_sha": run.head_sha,
        "status": status,
        "conclusion": run.conclusion,
        "html_url": format!("https://github.com/octo/hello/actions/runs/1/job/{}", run.id),
        "details_url": format!("https://github.com/octo/hello/actions/runs/1/job/{}", run.id),
        "app": { "slug": "github-actions" },
        "output": { "title": run.conclusion.as_deref().map(|c| format!("{} {c}", run.name)), "summary": null },
    })
    .as_object()
    .cloned()
    .unwrap_or_default()
}

fn review_json(review: &Review, pull: &Pull) -> Value {
    json!({
        "id": review.id,
        "user": { "login": review.user, "type": "User" },
        "author_association": review.association,
        "body": review.body,
        "state": review.state,
        "commit_id": review.commit_id,
        "submitted_at": "2026-11-28T04:00:00Z",
        "html_url": format!("https://github.com/{}/{}/pull/{}#pullrequestreview-{}", pull.owner, pull.repo, pull.number, review.id),
    })
}

/// Records the request; the 401 GitHub answers when it lacks the token.
fn refused(script: &Shared, what: String, headers: &HeaderMap) -> Option<Response> {
    let mut s = script.lock().expect("not poisoned");
    s.requests.push(what);
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let token = sent
        .strip_prefix("Bearer ")
        .or_else(|| sent.strip_prefix("token "))
        .unwrap_or_default();
    if token.is_empty() || token != s.token {
        return Some((
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({ "message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401" })),
        )
            .into_response());
    }
    None
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404" })),
    )
        .into_response()
}

async fn pull(
    State(script): State<Shared>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refused(
        &script,
        format!("GET /repos/{owner}/{repo}/pulls/{number}"),
        &headers,
    ) {
        return refused;
    }
    let s = script.lock().expect("not poisoned");
    match s
        .pulls
        .iter()
        .find(|p| p.owner == owner && p.repo == repo && p.number == number)
    {
        Some(pull) => axum::Json(pull_json(pull)).into_response(),
        None => not_found(),
    }
}

async fn check_runs(
    State(script): State<Shared>,
    Path((owner, repo, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refused(
        &script,
        format!("GET /repos/{owner}/{repo}/commits/{sha}/check-runs"),
        &headers,
    ) {
        return refused;
    }
    let s = script.lock().expect("not poisoned");
    let runs: Vec<Value> = s
        .checks
        .iter()
        .filter(|c| c.head_sha == sha)
        .map(|c| Value::Object(check_run(c)))
        .collect();
    axum::Json(json!({ "total_count": runs.len(), "check_runs": runs })).into_response()
}

/// GitHub answers a job's logs with a redirect to a short-lived download URL.
async fn job_logs(
    State(script): State<Shared>,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refused(
        &script,
        format!("GET /repos/{owner}/{repo}/actions/jobs/{id}/logs"),
        &headers,
    ) {
        return refused;
    }
    let known = script
        .lock()
        .expect("not poisoned")
        .checks
        .iter()
        .any(|c| c.id == id);
    if !known {
        return not_found();
    }
    (
        StatusCode::FOUND,
        [(header::LOCATION, format!("/download/logs/{id}"))],
    )
        .into_response()
}

/// The download URL needs no token: GitHub's is signed in its query.
async fn log_text(State(script): State<Shared>, Path(id): Path<u64>) -> Response {
    let mut s = script.lock().expect("not poisoned");
    s.requests.push(format!("GET /download/logs/{id}"));
    match s.checks.iter().find(|c| c.id == id) {
        Some(run) => ([(header::CONTENT_TYPE, "text/plain")], run.log.clone()).into_response(),
        None => not_found(),
    }
}

async fn reviews(
    State(script): State<Shared>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refused(
        &script,
        format!("GET /repos/{owner}/{repo}/pulls/{number}/reviews"),
        &headers,
    ) {
        return refused;
    }
    let s = script.lock().expect("not poisoned");
    let Some(pull) = s
        .pulls
        .iter()
        .find(|p| p.owner == owner && p.repo == repo && p.number == number)
    else {
        return not_found();
    };
    let reviews: Vec<Value> = s
        .reviews
        .iter()
        .filter(|r| r.number == number)
        .map(|r| review_json(r, pull))
        .collect();
    axum::Json(reviews).into_response()
}

async fn review_comments(
    State(script): State<Shared>,
    Path((owner, repo, number, id)): Path<(String, String, u64, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refused(
        &script,
        format!("GET /repos/{owner}/{repo}/pulls/{number}/reviews/{id}/comments"),
        &headers,
    ) {
        return refused;
    }
    let s = script.lock().expect("not poisoned");
    let Some(review) = s.reviews.iter().find(|r| r.id == id && r.number == number) else {
        return not_found();
    };
    let comments: Vec<Value> = review
        .comments
        .iter()
        .map(|(cid, path, line, body)| {
            json!({
                "id": cid,
                "pull_request_review_id": review.id,
                "path": path,
                "line": line,
                "body": body,
                "user": { "login": review.user },
            })
        })
        .collect();
    axum::Json(comments).into_response()
}
