//! MCP over stdio: the client starts `stepwise mcp`, which reaches the server over REST.

use serde_json::json;

use tokio::process::Command;

use super::client::{is_error, text};
use super::{QUEUE_TOOLS, names, setup, sorted, until};

#[tokio::test]
async fn stdio_serves_the_same_tools_and_runs_a_job_through_rest() {
    let s = setup().await;
    let mut client = s.client("stdio").await;
    let tools = client.ok(json!({ "op": "tools" })).await;
    // The same list as over HTTP: a user token's tools.
    assert_eq!(
        names(tools["tools"].as_array().unwrap()),
        sorted(&QUEUE_TOOLS)
    );
    let queued = client
        .call(
            "queue.enqueue",
            s.task(json!("- [ ] @fake say one\n- [ ] @fake say two")),
        )
        .await;
    assert!(!is_error(&queued), "{queued}");
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = until(&mut client, &id, |s| s.is_terminal()).await;
    assert_eq!(
        done["structuredContent"]["job"]["status"], "succeeded",
        "{done}"
    );
    assert_eq!(
        done["structuredContent"]["job"]["createdByUserId"], "mcp-operator",
        "{done}"
    );
    let steps = done["structuredContent"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{done}");
    assert_eq!(steps[1]["title"], "@fake say two", "{done}");

    // Refusals come back with the REST API's code.
    let missing = client
        .call(
            "queue.cancel",
            json!({ "jobId": "00000000-0000-0000-0000-000000000000" }),
        )
        .await;
    assert_eq!(
        missing["structuredContent"]["error"]["code"], "job_not_found",
        "{missing}"
    );
    let late = client.call("queue.cancel", json!({ "jobId": id })).await;
    assert!(is_error(&late), "{late}");
    assert_eq!(
        late["structuredContent"]["error"]["code"], "job_state_conflict",
        "{late}"
    );
    assert!(text(&late).contains("succeeded"), "{late}");
    client.ok(json!({ "op": "close" })).await;
}

#[tokio::test]
async fn stdio_with_a_token_the_server_does_not_know_exits_saying_what_to_do() {
    let s = setup().await;
    let out = Command::new(env!("CARGO_BIN_EXE_stepwise"))
        .args(["mcp", "--server", &s.server.url()])
        .env("STEPWISE_TOKEN", "swu_0123456789")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    // stdout is the protocol: nothing but MCP goes there.
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--token or STEPWISE_TOKEN"), "{stderr}");
    assert!(
        !stderr.contains("swu_0123456789"),
        "the token leaked: {stderr}"
    );
}

#[tokio::test]
async fn stdio_without_a_token_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_stepwise"))
        .args(["mcp", "--server", "http://127.0.0.1:9"])
        .env_remove("STEPWISE_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--token"), "{stderr}");
}
