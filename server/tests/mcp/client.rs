//! The official TypeScript SDK as the MCP client, run by Node and driven a request at a
//! time: what a user's agent or IDE does. `client.cjs` is SDK 1.x (protocol revisions up
//! to 2025-11-25) over HTTP or stdio; `client-modern.mjs` is SDK 2.x speaking 2026-07-28
//! over HTTP, with the tasks extension package.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

pub struct McpClient {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

/// Where the SDK is installed: agents/, as scripts/setup.sh installs it.
fn sdk_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../agents");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "the MCP SDK is not in {}: run `npm ci` in agents/ (scripts/test.sh does)",
        dir.display()
    );
    dir
}

impl McpClient {
    /// A client over `transport` (`http` or `stdio`) to the server at `url`, sending
    /// `token`; not yet connected.
    pub fn new(transport: &str, url: &str, token: Option<&str>) -> McpClient {
        McpClient::spawn("client.cjs", transport, url, token)
    }

    /// A 2026-07-28 client over HTTP, through `initialize`'s successor (`server/discover`).
    pub async fn modern(url: &str, token: &str) -> McpClient {
        let mut client = McpClient::spawn("client-modern.mjs", "http", url, Some(token));
        let connected = client.ok(json!({ "op": "connect" })).await;
        assert_eq!(connected["era"], "modern", "{connected}");
        client
    }

    fn spawn(script: &str, transport: &str, url: &str, token: Option<&str>) -> McpClient {
        let mut command = Command::new("node");
        command
            .arg(format!("{}/tests/mcp/{script}", env!("CARGO_MANIFEST_DIR")))
            .env("SDK_DIR", sdk_dir())
            .env("MCP_TRANSPORT", transport)
            .env("MCP_URL", url)
            .env("STEPWISE_BIN", env!("CARGO_BIN_EXE_stepwise"))
            .env_remove("MCP_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if let Some(token) = token {
            command.env("MCP_TOKEN", token);
        }
        let mut child = command.spawn().expect("node runs the MCP client");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        McpClient {
            _child: child,
            stdin,
            lines,
        }
    }

    /// A client already through `initialize`.
    pub async fn connected(transport: &str, url: &str, token: &str) -> McpClient {
        let mut client = McpClient::new(transport, url, Some(token));
        client.ok(json!({ "op": "connect" })).await;
        client
    }

    /// One request to the client: its `{"ok": …}` or `{"error": …}`.
    pub async fn op(&mut self, request: Value) -> Value {
        let mut line = request.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the MCP client did not answer {request}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the MCP client exited on {request}"));
        serde_json::from_str(&answer).unwrap()
    }

    pub async fn ok(&mut self, request: Value) -> Value {
        let answer = self.op(request.clone()).await;
        match answer.get("ok") {
            Some(ok) => ok.clone(),
            None => panic!("{request} failed: {answer}"),
        }
    }

    /// `tools/call`: the tool's result (a refusal is a result too, with `isError`).
    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.ok(json!({ "op": "call", "name": name, "arguments": arguments }))
            .await
    }
}

/// The text of a tool result's first content block.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

pub fn is_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or(false)
}
