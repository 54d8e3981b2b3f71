//! A worker process killed with SIGKILL mid-step, for real: `stepwise serve` and two
//! `stepwise worker` processes. The lease runs out, the job is retried on the other worker
//! and succeeds there; the dead worker's agent died with it, and its token can no longer
//! write to the job (fencing). Everything the agent started dies with the worker too, even
//! what ignores SIGTERM.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use contract::JobState;
use serde_json::json;
use worker::client::QueueClient;
use worker::testing::{alive, group_members};

use common::{BIN, Process, wait_for, wait_up_to};

mod common;

/// `stepwise serve` on a free port with no embedded worker: (process, base URL, admin token).
fn serve(data: &Path, site: &Path) -> (Process, String, String) {
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--port", "0", "--no-worker", "--data-dir"])
        .arg(data)
        .arg("--site-root")
        .arg(site)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit());
    let served = common::serve(command);
    let admin = served.admin.expect("serve printed the first admin token");
    (served.process, served.url, admin)
}

fn worker_token(data: &Path, name: &str) -> String {
    common::worker_token(&["--data-dir".as_ref(), data.as_os_str()], name)
}

fn worker(url: &str, token: &str, workdir: &Path) -> Process {
    let child = Command::new(BIN)
        .args(["worker", "--server", url, "--token", token])
        .args(["--capability", "claude", "--capability", "git"])
        .args(["--lease-seconds", "3", "--grace-seconds", "1"])
        // The test reads the agent's host pid from a file it writes outside its workspace:
        // this is the guard's test, for steps run without the box; `sandbox.rs` kills a
        // worker whose steps are boxed.
        .args(["--sandbox", "off"])
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

async fn pid_in(file: &Path) -> u32 {
    wait_for("a pid file", async || common::pid_in(file)).await
}

#[tokio::test]
async fn a_grandchild_that_ignores_sigterm_dies_with_a_killed_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (_server, url, admin) = serve(&data, &tmp.path().join("site"));
    let remote = worker::testing::remote(tmp.path());
    let token = worker_token(&data, "doomed");
    let user = QueueClient::new(&url, &admin).unwrap();
    let mut doomed = worker(&url, &token, &tmp.path().join("w1"));
    let (agent_file, child_file) = (tmp.path().join("agent.pid"), tmp.path().join("child.pid"));
    user.create_job(&json!({ "payload": {
        "repository": remote,
        "task": {
            "instructions": "Leave a stubborn child behind",
            "runtime": { "mode": "claude" },
            "publish": { "mode": "none" },
            "steps": [{ "instructions": format!(
                "@fake pid {}\n@fake spawn-child {}\n@fake sleep 60",
                agent_file.display(),
                child_file.display()
            ) }],
        },
    }}))
    .await
    .unwrap();
    let agent = pid_in(&agent_file).await;
    let child = pid_in(&child_file).await;
    // The agent leads its own group, and the child is in it.
    let running = |pid: u32| {
        group_members(agent)
            .iter()
            .any(|&(p, s)| p == pid && s != 'Z')
    };
    assert!(
        running(agent) && running(child),
        "{:?}",
        group_members(agent)
    );

    doomed.0.kill().unwrap();
    let killed = Instant::now();
    doomed.0.wait().unwrap();
    wait_up_to(
        Duration::from_secs(2),
        "every process of the step dying with its worker",
        async || {
            let left: Vec<_> = group_members(agent)
                .into_iter()
                .filter(|&(_, state)| state != 'Z')
                .collect();
            left.is_empty().then_some(())
        },
    )
    .await;
    eprintln!(
        "kill -9 of the worker → its step's group gone: {:?}",
        killed.elapsed()
    );
    assert!(!alive(child));
}
