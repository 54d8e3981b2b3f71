//! A worker process killed with SIGKILL mid-step, for real: `stepwise serve` and two
//! `stepwise worker` processes. The lease runs out, the job is retried on the other worker
//! and succeeds there; the dead worker's agent died with it, and its token can no longer
//! write to the job (fencing).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use contract::JobState;
use serde_json::json;
use worker::client::QueueClient;
use worker::testing::alive;

const BIN: &str = env!("CARGO_BIN_EXE_stepwise");

/// Kills the process when the test ends, however it ends.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `stepwise serve` on a free port with no embedded worker: (process, base URL, admin token).
fn serve(data: &Path, site: &Path) -> (Process, String, String) {
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--port", "0", "--no-worker", "--data-dir"])
        .arg(data)
        .arg("--site-root")
        .arg(site)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut token, mut url) = (None, None);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(t) = line.split(": ").nth(1).filter(|t| t.starts_with("swu_")) {
            token = Some(t.trim().to_string());
        }
        if let Some(u) = line.strip_prefix("stepwise is running on ") {
            url = Some(u.trim().to_string());
            break;
        }
    }
    // Keep reading, so the server never writes into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (
        Process(child),
        url.expect("serve printed its URL"),
        token.expect("serve printed the first admin token"),
    )
}

fn worker_token(data: &Path, name: &str) -> String {
    let out = Command::new(BIN)
        .args([
            "token",
            "create",
            "--kind",
            "worker",
            "--name",
            name,
            "--data-dir",
        ])
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("(shown only now): ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token in {text}"))
        .to_string()
}

fn worker(url: &str, token: &str, workdir: &Path) -> Process {
    let child = Command::new(BIN)
        .args(["worker", "--server", url, "--token", token])
        .args(["--capability", "claude", "--capability", "git"])
        .args(["--lease-seconds", "3", "--grace-seconds", "1"])
        .arg("--claude-bin")
        .arg(worker::testing::fixture("fake-agent"))
        .arg("--workdir")
        .arg(workdir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Process(child)
}

async fn wait_for<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_up_to(Duration::from_secs(60), what, check).await
}

async fn wait_up_to<T>(
    limit: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_killed_worker_s_job_is_retried_elsewhere_and_the_dead_worker_is_fenced() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (_server, url, admin) = serve(&data, &tmp.path().join("site"));
    let remote = worker::testing::remote(tmp.path());
    let first_token = worker_token(&data, "doomed");
    let second_token = worker_token(&data, "survivor");
    let user = QueueClient::new(&url, &admin).unwrap();

    let mut first = worker(&url, &first_token, &tmp.path().join("w1"));
    let pidfile = tmp.path().join("agent.pid");
    let job = user
        .create_job(&json!({ "payload": {
            "repository": remote,
            "task": {
                "instructions": "Survive",
                "runtime": { "mode": "claude" },
                "publish": { "mode": "none" },
                "steps": [{ "instructions": format!(
                    "@fake pid {}\n@fake say started\n@fake sleep 6\n@fake write done.txt yes",
                    pidfile.display()
                ) }],
            },
        }}))
        .await
        .unwrap();
    let agent: u32 = wait_for("the agent starting", async || {
        let job = user.get_job(&job.id).await.unwrap();
        let pid = std::fs::read_to_string(&pidfile)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (job.claimed_by.as_deref() == Some("doomed")).then_some(pid)
    })
    .await;

    first.0.kill().unwrap();
    first.0.wait().unwrap();
    // Well before its 6 s sleep ends: the kernel kills it with the worker.
    wait_up_to(
        Duration::from_secs(2),
        "the agent dying with its worker",
        async || (!alive(agent)).then_some(()),
    )
    .await;

    let _second = worker(&url, &second_token, &tmp.path().join("w2"));
    let done = wait_for("the retry finishing", async || {
        let job = user.get_job(&job.id).await.unwrap();
        job.status.is_terminal().then_some(job)
    })
    .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?}");
    assert_eq!(done.attempt, 2);
    assert_eq!(done.claimed_by.as_deref(), Some("survivor"));
    let events = user.list_events(&job.id, None, Some(500)).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == contract::job::events::JOB_LEASE_EXPIRED),
        "{events:#?}"
    );

    // The dead worker's attempt is fenced off: nothing it might still send is taken.
    let stale = QueueClient::new(&url, &first_token).unwrap();
    let refused = stale.complete(&job.id, 1, Some("late")).await.unwrap_err();
    assert_eq!(refused.status().map(|s| s.as_u16()), Some(409), "{refused}");
    let refused = stale.heartbeat(&job.id, 1, Some(3)).await.unwrap_err();
    assert_eq!(refused.status().map(|s| s.as_u16()), Some(409), "{refused}");
}
