//! `POST /api/integrations/github`: GitHub's webhook deliveries. A delivery is taken only
//! with a valid `X-Hub-Signature-256` (the HMAC-SHA256 of the raw body under
//! `--github-webhook-secret`). One of a check run, a check suite, a review or a pull
//! request brings the next look at the pull requests it names forward (pull request
//! feedback, always read back from GitHub's API: a delivery only says when to look). With
//! `--github-rules`, an issue labeled or a comment that mentions stepwise becomes a job
//! (`crate::github::intake`), once per `X-GitHub-Delivery`.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use contract::api::{DeliveryOutcome, ErrorBody, ErrorCode, GitHubDelivered};
use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/integrations/github", post(github))
        .method_not_allowed_fallback(super::method_not_allowed)
}

/// The pull requests a delivery of `event` names, by address.
fn pulls_named(event: &str, payload: &Value) -> Vec<String> {
    let repo = payload["repository"]["html_url"]
        .as_str()
        .unwrap_or_default();
    let numbered = |list: &Value| -> Vec<String> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["number"].as_u64())
            .filter(|_| !repo.is_empty())
            .map(|n| format!("{repo}/pull/{n}"))
            .collect()
    };
    // Only what can change a look's answer: a check or suite that ended, a review given or
    // withdrawn, a pull request closed. A suite's runs starting would each wake a look.
    let action = payload["action"].as_str().unwrap_or_default();
    let counts = matches!(
        (event, action),
        ("check_run" | "check_suite", "completed")
            | ("pull_request_review", "submitted" | "dismissed")
            | ("pull_request", "closed")
    );
    if !counts {
        return Vec::new();
    }
    match event {
        "check_run" => numbered(&payload["check_run"]["pull_requests"]),
        "check_suite" => numbered(&payload["check_suite"]["pull_requests"]),
        "pull_request_review" | "pull_request" => payload["pull_request"]["html_url"]
            .as_str()
            .map(|u| vec![u.to_string()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

#[utoipa::path(post, path = "/api/integrations/github", tag = "integrations",
    request_body(content = Vec<u8>, content_type = "application/json", description = "a webhook delivery exactly as GitHub sends it, with its `X-GitHub-Event`, `X-GitHub-Delivery` and `X-Hub-Signature-256` headers"),
    responses((status = 202, description = "taken: the watches of the pull requests it names look again now, and what the rules made of it (a job queued or followed up, a repeat, ignored or refused, and why)", body = GitHubDelivered), (status = 401, description = "no signature, or not the HMAC of the body under the server's secret: nothing was done", body = ErrorBody), (status = 404, description = "the server takes no GitHub deliveries (no --github-webhook-secret)", body = ErrorBody), (status = 400, body = ErrorBody)))]
async fn github(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(axum::http::StatusCode, Json<GitHubDelivered>), ApiError> {
    let Some(hook) = &state.github else {
        return Err(ApiError::new(
            ErrorCode::RouteNotFound,
            "this server takes no GitHub webhook deliveries: start it with --github-webhook-secret",
        ));
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signed = header("x-hub-signature-256").unwrap_or_default();
    if !hook.verifies(signed, &body) {
        return Err(ApiError::unauthorized(
            "X-Hub-Signature-256 is missing or is not the HMAC-SHA256 of the body under the \
             server's GitHub webhook secret: check the secret in the webhook's settings",
        ));
    }
    let event = header("x-github-event").unwrap_or_default().to_string();
    if event.is_empty() {
        return Err(ApiError::bad_request("X-GitHub-Event is missing"));
    }
    let payload: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let mut nudged = 0;
    for pull in pulls_named(&event, &payload) {
        nudged += state.queue.nudge_pull(&pull).await?;
    }
    if nudged > 0 {
        hook.wake.notify_one();
    }
    let mut answer = GitHubDelivered {
        event,
        nudged,
        outcome: DeliveryOutcome::Ignored,
        job: None,
        reason: None,
    };
    if let Some(intake) = &hook.intake {
        let delivery = header("x-github-delivery").unwrap_or_default();
        if let Some(problem) = contract::source::delivery_problem(delivery) {
            return Err(ApiError::bad_request(format!(
                "X-GitHub-Delivery: {problem}"
            )));
        }
        let taken = intake
            .take(&state.queue, &answer.event, delivery, &payload)
            .await?;
        answer.outcome = taken.outcome;
        answer.job = taken.job;
        answer.reason = taken.reason;
    }
    Ok((axum::http::StatusCode::ACCEPTED, Json(answer)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::pulls_named;

    #[test]
    fn a_delivery_names_the_pull_requests_of_its_check_or_review() {
        let repo = json!({ "html_url": "https://github.com/octo/hello" });
        let check = json!({ "action": "completed", "repository": repo, "check_run": { "pull_requests": [{ "number": 7 }, { "number": 9 }] } });
        assert_eq!(
            pulls_named("check_run", &check),
            [
                "https://github.com/octo/hello/pull/7",
                "https://github.com/octo/hello/pull/9"
            ]
        );
        let review = json!({ "action": "submitted", "repository": repo, "pull_request": { "html_url": "https://github.com/octo/hello/pull/7" } });
        assert_eq!(
            pulls_named("pull_request_review", &review),
            ["https://github.com/octo/hello/pull/7"]
        );
        assert!(pulls_named("issues", &review).is_empty());
        let started = json!({ "action": "created", "repository": repo, "check_run": { "pull_requests": [{ "number": 7 }] } });
        assert!(
            pulls_named("check_run", &started).is_empty(),
            "a run that only started"
        );
        assert!(pulls_named("check_run", &json!({ "check_run": {} })).is_empty());
    }
}
