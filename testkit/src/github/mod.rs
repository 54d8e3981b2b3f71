//! A scripted GitHub REST API for tests: pull requests, check runs with their logs (as
//! GitHub Actions serves them, by a redirect to the text), reviews and their line comments,
//! in GitHub's documented shapes; and webhook deliveries signed as GitHub signs them
//! (`X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>`); issues, their comments and
//! the repository's collaborators (`issues.rs`). It answers only a caller that sends its
//! token, and records every request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::{get, patch, post};
use serde_json::{Value, json};

mod issues;
mod routes;

pub use issues::{Comment, Issue};

use routes::{
    check_run, check_runs, job_logs, log_text, pull, pull_json, pull_ref, repository,
    review_comments, review_json, reviews,
};

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
    /// `(login, permission)`.
    collaborators: Vec<(String, String)>,
    comments: Vec<Comment>,
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
            .route(
                "/repos/{owner}/{repo}/collaborators/{user}/permission",
                get(issues::permission),
            )
            .route(
                "/repos/{owner}/{repo}/issues/{number}/comments",
                post(issues::post_comment),
            )
            .route(
                "/repos/{owner}/{repo}/issues/comments/{id}",
                patch(issues::edit_comment),
            )
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
