//! The scripted API's answers: GitHub's documented shapes of a pull request, a check run
//! and a review, and the handlers of its routes.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{CheckRun, Pull, Review, Shared};

pub(super) fn repository(pull: &Pull) -> Value {
    json!({
        "name": pull.repo,
        "full_name": format!("{}/{}", pull.owner, pull.repo),
        "owner": { "login": pull.owner },
        "html_url": format!("https://github.com/{}/{}", pull.owner, pull.repo),
    })
}

pub(super) fn pull_ref(pull: &Pull) -> Value {
    json!({
        "number": pull.number,
        "head": { "ref": pull.head_ref, "sha": pull.head_sha },
        "base": { "ref": "main" },
    })
}

pub(super) fn pull_json(pull: &Pull) -> Value {
    json!({
        "number": pull.number,
        "state": pull.state,
        "merged": false,
        "html_url": format!("https://github.com/{}/{}/pull/{}", pull.owner, pull.repo, pull.number),
        "head": { "ref": pull.head_ref, "sha": pull.head_sha },
        "base": { "ref": "main" },
    })
}

pub(super) fn check_run(run: &CheckRun) -> serde_json::Map<String, Value> {
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

pub(super) fn review_json(review: &Review, pull: &Pull) -> Value {
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
pub(super) fn refused(script: &Shared, what: String, headers: &HeaderMap) -> Option<Response> {
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

pub(super) fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404" })),
    )
        .into_response()
}

pub(super) async fn pull(
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

pub(super) async fn check_runs(
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
pub(super) async fn job_logs(
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
pub(super) async fn log_text(State(script): State<Shared>, Path(id): Path<u64>) -> Response {
    let mut s = script.lock().expect("not poisoned");
    s.requests.push(format!("GET /download/logs/{id}"));
    match s.checks.iter().find(|c| c.id == id) {
        Some(run) => ([(header::CONTENT_TYPE, "text/plain")], run.log.clone()).into_response(),
        None => not_found(),
    }
}

pub(super) async fn reviews(
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

pub(super) async fn review_comments(
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
