//! Real agent CLIs as the MCP client: Claude Code and Codex, pinned in agents/, each with
//! stepwise registered as an HTTP MCP server in its configuration, and the scripted model
//! server telling the model to call `queue.enqueue`. The job must appear with the steps
//! the model sent, and the tool's answer must reach the model.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::ModelServer;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{Setup, setup_with};

fn agent(name: &str) -> PathBuf {
    let bin = std::env::var_os("STEPWISE_AGENTS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../agents/node_modules/.bin")
        });
    let path = bin.join(name);
    assert!(
        path.exists(),
        "{name} is not in {}: run `npm ci` in agents/ (scripts/test.sh does)",
        bin.display()
    );
    path
}

/// What the model is told to send: a task with two steps.
fn arguments(s: &Setup) -> Value {
    json!({
        "repository": s.remote,
        "objective": "Plan the team offsite",
        "steps": ["Research three venues", "Send the shortlist to the team"],
        "runtime": "claude",
        "publish": "none",
    })
}

/// Runs `command` with `prompt` on stdin to its end: its stdout and stderr.
async fn run(mut command: Command, prompt: &str) -> (String, String) {
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the agent starts");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(prompt.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the agent finished within 2 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "the agent failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// The job the model queued has the steps it sent, and the tool's answer reached it.
async fn assert_queued_as_sent(s: &Setup, model: &ModelServer, output: &str) {
    let jobs = s
        .server
        .queue()
        .list_jobs(&Default::default())
        .await
        .unwrap()
        .jobs;
    // What the CLI offered the model, for the failure message.
    let offered: Vec<String> = model
        .requests()
        .iter()
        .find_map(|r| r.body["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{} {}", t["type"], t["name"]))
        .collect();
    assert_eq!(
        jobs.len(),
        1,
        "no job from the agent, offered {offered:?}:\n{output}"
    );
    let job = &jobs[0];
    let steps: Vec<&str> = job.payload["task"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["instructions"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        ["Research three venues", "Send the shortlist to the team"]
    );
    assert_eq!(job.payload["task"]["instructions"], "Plan the team offsite");
    assert_eq!(job.created_by_user_id.as_deref(), Some("mcp-operator"));

    // The tool's answer went back to the model, which then replied. Claude Code gives the
    // model the structured content alone when there is one, so the summary line is there.
    let requests = model.requests();
    let called = requests
        .iter()
        .flat_map(|r| testkit::texts(&r.body))
        .any(|t| t.contains(&format!("job {} queued, 2 steps waiting", job.id)));
    assert!(
        called,
        "the tool's answer never reached the model: {:#?}",
        requests.last().map(|r| &r.body)
    );
    assert!(output.contains("Queued it."), "{output}");
}

#[tokio::test]
async fn claude_code_enqueues_a_task_through_stepwise_mcp_with_the_steps_the_model_sent() {
    let s = setup_with(false).await;
    let model = ModelServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("mcp.json");
    let servers = json!({ "mcpServers": { "stepwise": {
        "type": "http",
        "url": format!("{}/mcp", s.server.url()),
        "headers": { "Authorization": format!("Bearer {}", s.operator) },
    } } });
    std::fs::write(&config, servers.to_string()).unwrap();
    let prompt = format!(
        "Queue the offsite task.\n@model tool queue.enqueue {}\n@model reply Queued it.",
        arguments(&s)
    );
    let mut claude = Command::new(agent("claude"));
    claude
        .args(["-p", "--mcp-config"])
        .arg(&config)
        .args([
            "--strict-mcp-config",
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("IS_SANDBOX", "1")
        // Claude Code defers MCP tools behind its ToolSearch tool when it may; the script
        // calls the tool straight away, as a model does once the tool is loaded.
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("ANTHROPIC_BASE_URL", model.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-test-0000")
        .current_dir(home.path());
    let (stdout, _) = run(claude, &prompt).await;
    assert_queued_as_sent(&s, &model, &stdout).await;
}

#[tokio::test]
async fn codex_enqueues_a_task_through_stepwise_mcp_with_the_steps_the_model_sent() {
    let s = setup_with(false).await;
    let model = ModelServer::start().await;
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join(".codex");
    std::fs::create_dir(&codex_home).unwrap();
    // As the README registers it: the token comes from the environment, never the file.
    let config = format!(
        "[mcp_servers.stepwise]\nurl = \"{}/mcp\"\nbearer_token_env_var = \"STEPWISE_TOKEN\"\n",
        s.server.url()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let prompt = format!(
        "Queue the offsite task.\n@model tool queue.enqueue {}\n@model reply Queued it.",
        arguments(&s)
    );
    let mut codex = Command::new(agent("codex"));
    codex
        .arg("-c")
        .arg(format!("openai_base_url={}/v1", model.url()))
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            "gpt-5.1-codex",
            "-",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("CODEX_HOME", &codex_home)
        .env("CODEX_API_KEY", "sk-test-0000")
        .env("STEPWISE_TOKEN", &s.operator)
        .current_dir(home.path());
    let (stdout, stderr) = run(codex, &prompt).await;
    assert_queued_as_sent(&s, &model, &format!("{stdout}\n{stderr}")).await;
}
