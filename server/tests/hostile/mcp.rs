//! `/mcp` under hostile input, on both backends: garbage bodies, JSON-RPC that is broken
//! in every part, and every tool called with mutated and hostile arguments. The server
//! must never fail (no 5xx, no JSON-RPC internal error), must refuse in the protocol's
//! shape, and must still serve afterwards.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use stepwise::testing::site::Backend;

use crate::Site;
use crate::garbage::{Garbage, HOSTILE};

#[tokio::test]
async fn garbage_to_mcp_never_breaks_the_server_on_sqlite() {
    mcp_garbage(Backend::Sqlite).await;
}

#[tokio::test]
async fn garbage_to_mcp_never_breaks_the_server_on_postgres() {
    mcp_garbage(Backend::Postgres).await;
}

#[tokio::test]
async fn hostile_tool_arguments_are_refused_as_tool_or_protocol_errors_on_sqlite() {
    mcp_tools(Backend::Sqlite).await;
}

#[tokio::test]
async fn hostile_tool_arguments_are_refused_as_tool_or_protocol_errors_on_postgres() {
    mcp_tools(Backend::Postgres).await;
}

/// A valid call of each tool, which the hostile cases mutate.
fn tool_calls(site: &Site) -> Vec<(&'static str, Value)> {
    let job = site.job_id.as_str();
    vec![
        (
            "queue.enqueue",
            json!({ "repository": "octo/repo", "objective": "Fix it", "steps": ["one", "two"], "runtime": "codex", "publish": "none" }),
        ),
        (
            "queue.enqueue",
            json!({ "objective": "Fix it", "steps": "- [ ] one\n- [ ] two" }),
        ),
        (
            "queue.enqueue",
            json!({ "request": { "payload": { "repository": "octo/repo", "task": { "instructions": "x" } } } }),
        ),
        ("queue.get", json!({ "jobId": job })),
        ("queue.list", json!({ "status": "queued", "limit": 5 })),
        (
            "queue.events",
            json!({ "jobId": job, "after": 0, "limit": 10 }),
        ),
        ("queue.cancel", json!({ "jobId": job, "reason": "x" })),
        ("queue.artifacts", json!({ "jobId": job })),
        (
            "queue.artifact",
            json!({ "jobId": job, "name": "logs/step-1.log", "maxBytes": 10 }),
        ),
        (
            "tasks.start",
            json!({ "objective": "Fix it", "completionCriteria": "tests pass", "checkCommand": "make test", "maxIterations": 3, "steps": ["one"] }),
        ),
        ("tasks.status", json!({ "taskId": job })),
        ("tasks.list", json!({ "status": "running", "limit": 5 })),
        ("tasks.cancel", json!({ "taskId": job, "reason": "x" })),
        ("tasks.pause", json!({ "taskId": job, "immediate": true })),
        (
            "tasks.resume",
            json!({ "taskId": job, "checkpoint": "step-1" }),
        ),
        ("tasks.retry", json!({ "taskId": job, "fromStep": 2 })),
        ("tasks.approve", json!({ "taskId": job })),
        ("tasks.reject", json!({ "taskId": job, "reason": "no" })),
        ("tasks.append", json!({ "taskId": job, "steps": ["more"] })),
        (
            "tasks.follow_up",
            json!({ "taskId": job, "steps": ["again"] }),
        ),
        (
            "queue.claim",
            json!({ "capabilities": ["codex"], "waitSeconds": 0 }),
        ),
        ("queue.heartbeat", json!({ "jobId": job, "attempt": 1 })),
        (
            "queue.complete",
            json!({ "jobId": job, "attempt": 1, "resultSummary": "done" }),
        ),
        (
            "queue.fail",
            json!({ "jobId": job, "attempt": 1, "errorMessage": "x" }),
        ),
        (
            "queue.upload_artifact",
            json!({ "jobId": job, "attempt": 1, "name": "a.txt", "content": "x" }),
        ),
    ]
}

/// One POST to `/mcp` as `token`, in `session`; its status and the JSON-RPC messages it
/// answered with (plain JSON, or the data lines of an event stream).
async fn post(
    site: &Site,
    token: &str,
    session: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Option<String>, Vec<Value>) {
    post_with(site, token, session, &[], body).await
}

/// [`post`] with more headers: a 2026-07-28 request names its revision and method in them.
async fn post_with(
    site: &Site,
    token: &str,
    session: Option<&str>,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (StatusCode, Option<String>, Vec<Value>) {
    let mut request = Request::post("/mcp")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (name, value) in headers {
        if axum::http::HeaderValue::from_str(value).is_ok() {
            request = request.header(*name, value);
        }
    }
    let answer = site.send_all(request.body(Body::from(body)).unwrap()).await;
    let session = answer
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let messages = answer
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim))
        .chain(std::iter::once(answer.body.trim()))
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .filter(|v| v.get("jsonrpc").is_some())
        .collect();
    (answer.status, session, messages)
}

/// A session through `initialize` and `notifications/initialized`.
async fn session(site: &Site, token: &str) -> String {
    let hello = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": { "name": "hostile", "version": "0" } } });
    let (status, session, messages) = post(site, token, None, hello.to_string().into_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{messages:?}");
    let session = session.expect("a session id");
    let ready = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    post(site, token, Some(&session), ready.to_string().into_bytes()).await;
    session
}

/// No answer is a server failure: not a 5xx, and not a JSON-RPC internal error.
fn check(backend: Backend, what: &str, status: StatusCode, messages: &[Value]) {
    assert!(!status.is_server_error(), "{backend:?}: {what} → {status}");
    for message in messages {
        assert_ne!(
            message["error"]["code"], -32603,
            "{backend:?}: {what} → an internal error: {message}"
        );
    }
}

async fn mcp_garbage(backend: Backend) {
    let site = Site::start(backend).await;
    let mut garbage = Garbage::new(17);
    let session = session(&site, &site.admin).await;
    let methods = [
        "initialize",
        "tools/list",
        "tools/call",
        "resources/read",
        "resources/list",
        "resources/subscribe",
        "tasks/get",
        "tasks/cancel",
        "ping",
        "nope/nope",
    ];
    for case in 0..crate::cases() * 4 {
        let body = match case % 4 {
            0 => garbage.body(None),
            1 => garbage.json().to_string().into_bytes(),
            2 => json!({ "jsonrpc": "2.0", "id": garbage.json(), "method": methods[garbage.below(methods.len())],
                "params": garbage.json() }).to_string().into_bytes(),
            _ => {
                let valid = json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read",
                    "params": { "uri": format!("stepwise://tasks/{}", site.job_id) } });
                garbage.mutate(&valid).to_string().into_bytes()
            }
        };
        let with = if case % 3 == 0 {
            None
        } else {
            Some(session.as_str())
        };
        let (status, _, messages) = post(&site, &site.admin, with, body.clone()).await;
        check(backend, &String::from_utf8_lossy(&body), status, &messages);
    }
    // 2026-07-28 requests stand alone: the revision, the client and its capabilities are
    // in each one's `_meta`, its method and name in headers. Garbage in any part of them.
    // (`subscriptions/listen` is left out: a valid one is a stream that stays open.)
    let modern = [
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({ "name": "queue.get", "arguments": { "jobId": site.job_id } }),
        ),
        ("tasks/get", json!({ "taskId": site.job_id })),
        ("tasks/cancel", json!({ "taskId": site.job_id })),
        (
            "tasks/update",
            json!({ "taskId": site.job_id, "inputResponses": {} }),
        ),
        (
            "resources/read",
            json!({ "uri": format!("stepwise://tasks/{}", site.job_id) }),
        ),
        ("resources/list", json!({})),
        ("server/discover", json!({})),
    ];
    for case in 0..crate::cases() * 2 {
        let (method, params) = &modern[case % modern.len()];
        let mut params = params.clone();
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "hostile", "version": "0" },
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": { "io.modelcontextprotocol/tasks": {} } },
        });
        let request = json!({ "jsonrpc": "2.0", "id": case, "method": method, "params": params });
        let request = if case % 2 == 0 {
            garbage.mutate(&request)
        } else {
            request
        };
        let name = request["params"]["name"]
            .as_str()
            .or(request["params"]["taskId"].as_str())
            .or(request["params"]["uri"].as_str())
            .unwrap_or_default()
            .to_string();
        let headers = [
            ("mcp-protocol-version", "2026-07-28".to_string()),
            (
                "mcp-method",
                request["method"].as_str().unwrap_or(method).to_string(),
            ),
            ("mcp-name", name),
        ];
        let body = request.to_string().into_bytes();
        let (status, _, messages) = post_with(&site, &site.admin, None, &headers, body).await;
        check(backend, &request.to_string(), status, &messages);
        if case % 2 == 1 {
            // Unharmed, it is served: the garbage above is refused for what it is.
            assert!(
                messages.iter().any(|m| m.get("result").is_some()),
                "{backend:?}: {request} → {status} {messages:?}"
            );
        }
    }
    // Hostile text where a token or a session id goes is refused, not failed on.
    for text in HOSTILE
        .iter()
        .filter(|t| axum::http::HeaderValue::from_str(&format!("Bearer {t}")).is_ok())
    {
        let (status, _, _) = post(&site, text, None, b"{}".to_vec()).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{backend:?}: token {text:?}"
        );
        let (status, _, messages) = post(&site, &site.admin, Some(text), b"{}".to_vec()).await;
        check(backend, &format!("session {text:?}"), status, &messages);
    }
    site.assert_alive().await;
}

async fn mcp_tools(backend: Backend) {
    let site = Site::start(backend).await;
    let mut garbage = Garbage::new(29);
    for token in [site.admin.clone(), site.viewer.clone(), site.worker.clone()] {
        let session = session(&site, &token).await;
        let mut id = 1;
        for (name, valid) in tool_calls(&site) {
            // A third of the cases a route gets, for each of 18 tools and 3 tokens.
            for case in 0..crate::cases().div_ceil(3) {
                let arguments = match case % 3 {
                    0 => garbage.mutate(&valid),
                    1 => {
                        // Hostile text in every string field.
                        let mut arguments = valid.clone();
                        if let Some(fields) = arguments.as_object_mut() {
                            for value in fields.values_mut().filter(|v| v.is_string()) {
                                *value = json!(HOSTILE[garbage.below(HOSTILE.len())]);
                            }
                        }
                        arguments
                    }
                    _ => garbage.json(),
                };
                id += 1;
                let call = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": { "name": name, "arguments": arguments } });
                let (status, _, messages) =
                    post(&site, &token, Some(&session), call.to_string().into_bytes()).await;
                check(backend, &call.to_string(), status, &messages);
                for message in &messages {
                    let result = &message["result"];
                    if result["isError"] == true {
                        // A tool error says what was wrong: with the REST API's code, or,
                        // for arguments that do not fit the tool's schema, in the SDK's
                        // words naming the field.
                        let error = &result["structuredContent"]["error"];
                        let text = result["content"][0]["text"].as_str().unwrap_or_default();
                        if error.is_null() {
                            assert!(
                                text.starts_with("failed to deserialize parameters"),
                                "{backend:?}: {name} → {message}"
                            );
                        } else {
                            let code = error["code"].as_str();
                            assert!(
                                code.and_then(contract::api::ErrorCode::parse)
                                    .is_some_and(|c| !c.is_internal()),
                                "{backend:?}: {name} → {message}"
                            );
                        }
                    }
                }
            }
        }
    }
    site.assert_alive().await;
}
