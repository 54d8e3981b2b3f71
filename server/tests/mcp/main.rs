//! stepwise as an MCP server, driven by the official TypeScript SDK as a real client over
//! both transports: streamable HTTP at `/mcp`, and stdio through `stepwise mcp`, which
//! reaches the server over REST. Jobs run through the scripted agent.

mod agent;
mod client;
mod http;
mod modern;
mod resources;
mod stdio;
mod task_tools;
mod tasks;
mod worker_tools;

use std::time::{Duration, Instant};

use contract::JobState;
use queue::{Role, TokenKind};
use serde_json::{Value, json};
use worker::runner::{Shutdown, WorkerConfig, run};
use worker::testing::{remote, stage_config};

use client::McpClient;
use stepwise::testing::server::{TestServer, start};

/// Every tool a user token reaches.
const QUEUE_TOOLS: [&str; 18] = [
    "tasks.start",
    "tasks.status",
    "tasks.list",
    "tasks.cancel",
    "tasks.pause",
    "tasks.resume",
    "tasks.retry",
    "tasks.approve",
    "tasks.reject",
    "tasks.append",
    "tasks.follow_up",
    "queue.enqueue",
    "queue.get",
    "queue.list",
    "queue.events",
    "queue.cancel",
    "queue.artifacts",
    "queue.artifact",
];

/// Every tool a worker token reaches.
const WORKER_TOOLS: [&str; 5] = [
    "queue.claim",
    "queue.heartbeat",
    "queue.complete",
    "queue.fail",
    "queue.upload_artifact",
];

/// The names of listed tools, sorted.
fn names(tools: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    names.sort();
    names
}

struct Setup {
    server: TestServer,
    /// An operator's token.
    operator: String,
    /// A bare remote the jobs work on.
    remote: String,
    shutdown: Shutdown,
    _tmp: tempfile::TempDir,
}

/// A server with an operator token and a worker running jobs through the scripted agent.
async fn setup() -> Setup {
    setup_with(true).await
}

/// A server with an operator token, and a worker running jobs if `worker`.
async fn setup_with(worker: bool) -> Setup {
    let server = start().await;
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let mut config = WorkerConfig::new(stage_config(tmp.path()));
    config.claim_wait = Duration::from_secs(2);
    let shutdown = Shutdown::default();
    if worker {
        tokio::spawn(run(
            server.worker("mcp-worker").await,
            config,
            shutdown.clone(),
        ));
    }
    let operator = server
        .token("mcp-operator", TokenKind::User, Some(Role::Operator))
        .await;
    Setup {
        server,
        operator,
        remote,
        shutdown,
        _tmp: tmp,
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.stop.cancel();
        self.shutdown.hand_back.cancel();
    }
}

impl Setup {
    async fn client(&self, transport: &str) -> McpClient {
        McpClient::connected(transport, &self.server.url(), &self.operator).await
    }

    /// `queue.enqueue` arguments for a task on the test remote, run by the scripted agent.
    fn task(&self, steps: Value) -> Value {
        json!({
            "repository": self.remote,
            "objective": "Greet",
            "steps": steps,
            "runtime": "claude",
            "publish": "none",
        })
    }
}

/// Calls `queue.get` until the job's state passes `done`; the last result.
async fn until(client: &mut McpClient, id: &str, done: impl Fn(JobState) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let result = client.call("queue.get", json!({ "jobId": id })).await;
        let status: JobState =
            serde_json::from_value(result["structuredContent"]["job"]["status"].clone())
                .unwrap_or_else(|_| panic!("no job in {result}"));
        if done(status) {
            return result;
        }
        assert!(Instant::now() < deadline, "still {status}: {result}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
