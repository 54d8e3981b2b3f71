//! The worker's tools: a worker token claims, renews, uploads and finishes over MCP, under
//! the worker routes' rules, on both transports.

use queue::TokenKind;
use serde_json::json;

use super::client::{McpClient, is_error, text};
use super::{WORKER_TOOLS, names, setup_with, sorted};

async fn a_worker_runs_a_job_through_the_worker_tools(transport: &str) {
    let s = setup_with(false).await;
    let url = s.server.url();
    let mut operator = s.client(transport).await;
    let queued = operator
        .call("queue.enqueue", s.task(json!(["say hi"])))
        .await;
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let token = s.server.token("mcp-w1", TokenKind::Worker, None).await;
    let mut worker = McpClient::connected(transport, &url, &token).await;
    let tools = worker.ok(json!({ "op": "tools" })).await;
    // A worker token is shown the worker's tools only.
    assert_eq!(
        names(tools["tools"].as_array().unwrap()),
        sorted(&WORKER_TOOLS)
    );

    // A worker that cannot run the job's runtime gets nothing.
    let none = worker
        .call("queue.claim", json!({ "capabilities": ["gemini"] }))
        .await;
    assert_eq!(none["structuredContent"]["job"], json!(null), "{none}");
    let claimed = worker
        .call(
            "queue.claim",
            json!({ "capabilities": ["claude", "git"], "leaseSeconds": 30 }),
        )
        .await;
    assert!(!is_error(&claimed), "{claimed}");
    let job = &claimed["structuredContent"]["job"];
    assert_eq!(job["id"], id.as_str(), "{claimed}");
    assert_eq!(job["claimedBy"], "mcp-w1");
    let attempt = job["attempt"].as_u64().unwrap();

    let beat = worker
        .call(
            "queue.heartbeat",
            json!({ "jobId": id, "attempt": attempt }),
        )
        .await;
    assert!(text(&beat).contains("running"), "{beat}");
    let stale = worker
        .call(
            "queue.heartbeat",
            json!({ "jobId": id, "attempt": attempt + 1 }),
        )
        .await;
    assert_eq!(
        stale["structuredContent"]["error"]["code"], "job_ownership_mismatch",
        "{stale}"
    );

    let stored = worker
        .call(
            "queue.upload_artifact",
            json!({ "jobId": id, "attempt": attempt, "name": "logs/mcp.log", "content": "hello from mcp" }),
        )
        .await;
    assert!(!is_error(&stored), "{stored}");
    let binary = worker
        .call(
            "queue.upload_artifact",
            json!({ "jobId": id, "attempt": attempt, "name": "out.bin", "contentBase64": "AAEC/w==" }),
        )
        .await;
    assert_eq!(
        binary["structuredContent"]["artifact"]["size"], 4,
        "{binary}"
    );
    let bad = worker
        .call(
            "queue.upload_artifact",
            json!({ "jobId": id, "attempt": attempt, "name": "x", "contentBase64": "%%%" }),
        )
        .await;
    assert!(
        is_error(&bad) && text(&bad).contains("contentBase64"),
        "{bad}"
    );

    let done = worker
        .call(
            "queue.complete",
            json!({ "jobId": id, "attempt": attempt, "resultSummary": "said hi" }),
        )
        .await;
    assert!(text(&done).contains("succeeded, said hi"), "{done}");

    // The operator sees it all, and the worker tools refuse the operator.
    let read = operator
        .call(
            "queue.artifact",
            json!({ "jobId": id, "name": "logs/mcp.log" }),
        )
        .await;
    assert_eq!(
        read["structuredContent"]["text"], "hello from mcp",
        "{read}"
    );
    let refused = operator.call("queue.claim", json!({})).await;
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "worker_not_authorized",
        "{refused}"
    );
}

#[tokio::test]
async fn over_http_a_worker_runs_a_job_through_the_worker_tools() {
    a_worker_runs_a_job_through_the_worker_tools("http").await;
}

#[tokio::test]
async fn over_stdio_a_worker_runs_a_job_through_the_worker_tools() {
    a_worker_runs_a_job_through_the_worker_tools("stdio").await;
}

#[tokio::test]
async fn a_failure_that_may_not_be_retried_ends_the_job_failed() {
    let s = setup_with(false).await;
    let mut operator = s.client("http").await;
    let queued = operator.call("queue.enqueue", s.task(json!([]))).await;
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let token = s.server.token("mcp-w2", TokenKind::Worker, None).await;
    let mut worker = McpClient::connected("http", &s.server.url(), &token).await;
    let claimed = worker
        .call("queue.claim", json!({ "capabilities": ["claude", "git"] }))
        .await;
    let attempt = claimed["structuredContent"]["job"]["attempt"]
        .as_u64()
        .unwrap();
    let failed = worker
        .call(
            "queue.fail",
            json!({ "jobId": id, "attempt": attempt, "errorMessage": "the agent gave up" }),
        )
        .await;
    assert!(
        text(&failed).contains("failed, the agent gave up"),
        "{failed}"
    );
}
