//! git and gh that never answer, for real: a remote that accepts the connection and then
//! says nothing (a local TCP listener), and a gh that hangs ignoring SIGTERM. A cancel
//! stops them within a second and leaves nothing of them running; the stage's timeout stops
//! them with an error that says what to do.

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use contract::job::task;
use contract::{Defaults, NormalizedTask};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use worker::redact::Redactor;
use worker::stages::{Credentials, Report, StageConfig, TaskOutcome, Unshared, Warrant, run_task};
use worker::testing::{group_members, hanging_gh, remote, silent_remote, stage_config};

fn task(repository: &str, publish: &str) -> NormalizedTask {
    let raw = json!({ "payload": {
        "repository": repository,
        "task": {
            "instructions": "Greet the world",
            "runtime": { "mode": "claude" },
            "publish": { "mode": publish },
            "steps": [{ "instructions": "@fake write greeting.txt hello" }],
        },
    }});
    contract::normalize(&raw, &Defaults::default()).unwrap()
}

struct Running {
    outcome: tokio::task::JoinHandle<TaskOutcome>,
    reports: tokio::sync::mpsc::UnboundedReceiver<Report>,
}

fn start(config: &StageConfig, task: NormalizedTask, cancel: &CancellationToken) -> Running {
    let (tx, reports) = tokio::sync::mpsc::unbounded_channel();
    let (config, cancel) = (config.clone(), cancel.clone());
    let outcome = tokio::spawn(async move {
        run_task(
            &config,
            &"0190a000-0000-7000-8000-000000000001".parse().unwrap(),
            &task,
            Warrant {
                redactor: &Redactor::default(),
                credentials: &Credentials::default(),
                hold: &Unshared,
                restore: None,
                pause: &worker::stages::Pause::default(),
                approved: false,
                spent: Default::default(),
            },
            &cancel,
            tx,
        )
        .await
    });
    Running { outcome, reports }
}

impl Running {
    /// The outcome, and how long it took to come.
    async fn end(self) -> (TaskOutcome, Duration, Vec<String>) {
        let since = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(30), self.outcome)
            .await
            .expect("the run ended")
            .unwrap();
        let took = since.elapsed();
        let mut reports = self.reports;
        let mut messages = Vec::new();
        while let Ok(report) = reports.try_recv() {
            if let Report::Event { kind, message, .. } = report {
                messages.push(format!("{kind} {message}"));
            }
        }
        (outcome, took, messages)
    }
}

/// The processes whose command line mentions `text` (a zombie's is empty).
fn processes_mentioning(text: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(text)
                .then_some(pid)
        })
        .collect()
}

async fn connection(accepted: mpsc::Receiver<TcpStream>) -> TcpStream {
    tokio::task::spawn_blocking(move || accepted.recv_timeout(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("git connected to the remote")
}

#[tokio::test]
async fn a_cancel_during_prepare_stops_a_clone_from_a_remote_that_never_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let config = stage_config(tmp.path());
    let (url, accepted) = silent_remote();
    let cancel = CancellationToken::new();
    let run = start(&config, task(&url, "none"), &cancel);
    let mut stream = connection(accepted).await;
    let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
    // git clone and its HTTP transport, git-remote-http.
    let gits = processes_mentioning(port);
    assert!(gits.len() >= 2, "{gits:?}");

    cancel.cancel();
    let (outcome, took, events) = run.end().await;
    eprintln!("cancel during a hung clone → prepare cancelled: {took:?}");
    assert!(
        matches!(outcome, TaskOutcome::Cancelled { stage, .. } if stage == task::STAGE_PREPARE),
        "{outcome:?}"
    );
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with(task::STAGE_FINISHED) && e.ends_with("cancelled")),
        "{events:#?}"
    );
    // git's HTTP transport is gone: past what it sent, the remote reads the end.
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    match stream.read_to_end(&mut Vec::new()) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the connection is still open: {e}"),
    }
    // Gone entirely: not even a zombie is left (the transport, orphaned when git died, was
    // reaped by the worker).
    let left: Vec<_> = gits
        .iter()
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    assert!(left.is_empty(), "{left:?} of {gits:?}");
    // Nothing half-cloned passes for a mirror.
    let mirrors: Vec<_> = std::fs::read_dir(tmp.path().join("mirrors"))
        .unwrap()
        .collect();
    assert!(mirrors.is_empty(), "{mirrors:?}");
}

#[tokio::test]
async fn a_clone_that_outlasts_the_prepare_timeout_fails_saying_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = stage_config(tmp.path());
    config.prepare_timeout = Duration::from_secs(1);
    let (url, _accepted) = silent_remote();
    let run = start(&config, task(&url, "none"), &CancellationToken::new());
    let (outcome, took, _) = run.end().await;
    let TaskOutcome::Failed { stage, message } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(stage, task::STAGE_PREPARE);
    assert!(
        message.contains("git clone")
            && message.contains("did not finish within 1 s")
            && message.contains("raise --prepare-timeout-seconds"),
        "{message}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_cancel_during_publish_stops_a_gh_that_hangs_and_everything_it_started() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = stage_config(tmp.path());
    let pidfile = tmp.path().join("gh.pid");
    config.gh = hanging_gh(tmp.path(), &pidfile);
    let remote = remote(tmp.path());
    let cancel = CancellationToken::new();
    let run = start(&config, task(&remote, "pr"), &cancel);
    let gh = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // gh and its sleeps; give the child a moment to start.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(group_members(gh).len() >= 2, "{:?}", group_members(gh));

    cancel.cancel();
    let (outcome, took, events) = run.end().await;
    eprintln!("cancel during a hung gh → publish cancelled: {took:?}");
    assert!(
        matches!(outcome, TaskOutcome::Cancelled { stage, .. } if stage == task::STAGE_PUBLISH),
        "{outcome:?}"
    );
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(group_members(gh), [], "left of gh's group (Z: a zombie)");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with(task::STAGE_FINISHED) && e.ends_with("cancelled")),
        "{events:#?}"
    );
}

#[tokio::test]
async fn a_gh_that_outlasts_the_publish_timeout_fails_saying_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = stage_config(tmp.path());
    config.publish_timeout = Duration::from_secs(1);
    config.gh = hanging_gh(tmp.path(), &tmp.path().join("gh.pid"));
    let remote = remote(tmp.path());
    let run = start(&config, task(&remote, "pr"), &CancellationToken::new());
    let (outcome, _, _) = run.end().await;
    let TaskOutcome::Failed { stage, message } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(stage, task::STAGE_PUBLISH);
    assert!(
        message.contains("gh pr create did not finish within 1 s")
            && message.contains("raise --publish-timeout-seconds"),
        "{message}"
    );
}
