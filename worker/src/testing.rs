//! Test support for the worker and for crates that test against it (enable the `testing`
//! feature): real git repositories in temp dirs, the scripted agent and the recorded gh
//! shim from tests/fixtures, and a stage configuration that uses them. Panics on failure,
//! as test helpers do.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::git::MirrorCache;
use crate::process::{Budget, Limits};
use crate::publish::Identity;
use crate::redact::Redactor;
use crate::runtime::{Binaries, Endpoints};
use crate::stages::{
    Credentials, Pause, Report, Restore, StageConfig, TaskOutcome, Unshared, Warrant, run_task,
};

/// A file of the worker's tests/fixtures: `fake-agent` (a scripted agent CLI) or `gh`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Stages under `root` that run the scripted agent as `claude`, with the gh shim recording
/// into `root/gh.log`, a 300 ms grace period, 60 s for a step, for prepare and for publish,
/// and the capabilities claude, git and gh.
pub fn stage_config(root: &Path) -> StageConfig {
    let (gh, _log) = gh_shim(root);
    StageConfig {
        workdir: root.join("work"),
        mirrors: MirrorCache::new(root.join("mirrors")),
        skills_dir: root.join("skills"),
        binaries: Binaries {
            claude: fixture("fake-agent"),
            ..Binaries::default()
        },
        endpoints: Endpoints::default(),
        logins: None,
        limits: Limits {
            timeout: Duration::from_secs(60),
            grace: Duration::from_millis(300),
        },
        prepare_timeout: Duration::from_secs(60),
        publish_timeout: Duration::from_secs(60),
        github: "https://github.com".into(),
        identity: Identity::default(),
        gh,
        capabilities: vec!["claude".into(), "git".into(), "gh".into()],
        // The scripted agent's tests read its pids and files outside the workspace; the
        // sandbox's own tests box it.
        sandbox: crate::sandbox::Sandbox::off(),
        engine: None,
    }
}

/// Runs `task` as job `job_id` through its stages with `config`, on its own (no server,
/// no one else holding the job), redacting `secrets`: how it ended and what it reported,
/// in order.
pub async fn run_stages(
    config: &StageConfig,
    job_id: &str,
    task: &contract::NormalizedTask,
    secrets: &[&str],
    cancel: &tokio_util::sync::CancellationToken,
) -> (TaskOutcome, Vec<Report>) {
    run_stages_from(
        config,
        job_id,
        task,
        secrets,
        cancel,
        None,
        &Pause::default(),
    )
    .await
}

/// [`run_stages`], resuming from `restore` and obeying `pause`.
pub async fn run_stages_from(
    config: &StageConfig,
    job_id: &str,
    task: &contract::NormalizedTask,
    secrets: &[&str],
    cancel: &tokio_util::sync::CancellationToken,
    restore: Option<&Restore>,
    pause: &Pause,
) -> (TaskOutcome, Vec<Report>) {
    let job_id = job_id.parse().expect("a job id");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let redactor = Redactor::new(secrets.iter().copied());
    let warrant = Warrant {
        redactor: &redactor,
        credentials: &Credentials::default(),
        hold: &Unshared,
        restore,
        pause,
        approved: false,
        spent: Default::default(),
    };
    let outcome = run_task(config, &job_id, task, warrant, cancel, tx).await;
    let mut reports = Vec::new();
    while let Ok(report) = rx.try_recv() {
        reports.push(report);
    }
    (outcome, reports)
}

/// The names of the artifacts `reports` hand over, in order.
pub fn artifact_names(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .filter_map(|r| match r {
            Report::Artifact { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// A budget for git and gh in tests: 60 s, a 300 ms grace, never cancelled.
pub fn budget() -> Budget {
    Budget::new(
        "the test's budget",
        Duration::from_secs(60),
        Duration::from_millis(300),
        tokio_util::sync::CancellationToken::new(),
    )
}

/// Runs git in `dir` with a test identity and returns its trimmed stdout.
pub fn run(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bare remote whose default branch is `main`, with a `dev` branch one commit ahead.
/// [`remote`], at `root/OWNER/NAME.git` for `owner_name` (`octo/hello`): a repository whose
/// path names it as GitHub would.
pub fn named_remote(root: &Path, owner_name: &str) -> String {
    let made = remote(root);
    let named = root.join(format!("{owner_name}.git"));
    std::fs::create_dir_all(named.parent().expect("a parent")).unwrap();
    std::fs::rename(&made, &named).unwrap();
    named.display().to_string()
}

pub fn remote(root: &Path) -> String {
    let bare = root.join("remote.git");
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    run(
        root,
        &[
            "init",
            "--quiet",
            "--bare",
            "--initial-branch=main",
            bare.to_str().unwrap(),
        ],
    );
    run(&seed, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(seed.join("README.md"), "hello\n").unwrap();
    run(&seed, &["add", "."]);
    run(&seed, &["commit", "--quiet", "-m", "first"]);
    run(&seed, &["checkout", "--quiet", "-b", "dev"]);
    std::fs::write(seed.join("dev.txt"), "dev\n").unwrap();
    run(&seed, &["add", "."]);
    run(&seed, &["commit", "--quiet", "-m", "dev work"]);
    run(
        &seed,
        &["push", "--quiet", bare.to_str().unwrap(), "main", "dev"],
    );
    bare.to_string_lossy().into_owned()
}

/// The recorded gh shim, wrapped so that it records into `dir/gh.log`: (gh, log).
pub fn gh_shim(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("gh.log");
    let gh = dir.join("gh");
    let fixture = fixture("gh");
    let script = format!(
        "#!/bin/sh\nGH_SHIM_LOG='{}' exec '{}' \"$@\"\n",
        log.display(),
        fixture.display()
    );
    std::fs::write(&gh, script).unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (gh, log)
}

/// Whether process `pid` is still running (a zombie counts as gone: it runs nothing).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// The processes of group `pgid` as (pid, state): state `Z` is a zombie, which runs nothing
/// but is still there until someone reaps it.
pub fn group_members(pgid: u32) -> Vec<(u32, char)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let _ppid = fields.next()?;
            let pgrp: u32 = fields.next()?.parse().ok()?;
            (pgrp == pgid).then_some((pid, state))
        })
        .collect()
}

/// An HTTP "remote" that accepts every connection and never writes a byte: what a server
/// that hangs looks like to git. Its URL, and the accepted connections as they come.
pub fn silent_remote() -> (String, std::sync::mpsc::Receiver<std::net::TcpStream>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/octo/hello.git", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if tx.send(stream).is_err() {
                return;
            }
        }
    });
    (url, rx)
}

/// A gh in `dir` that writes its pid to `pidfile`, ignores SIGTERM, starts a child and
/// sleeps: a `gh pr create` that hangs.
pub fn hanging_gh(dir: &Path, pidfile: &Path) -> PathBuf {
    let gh = dir.join("hanging-gh");
    let script = format!(
        "#!/usr/bin/env bash\necho $$ >'{}'\ntrap '' TERM\nsleep 600 &\nsleep 600\n",
        pidfile.display()
    );
    std::fs::write(&gh, script).unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    gh
}

/// Every artifact of job `id`, by name, as the API serves it (as text, invalid UTF-8
/// replaced).
pub async fn artifacts(
    client: &crate::client::QueueClient,
    id: &contract::JobId,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for artifact in client.list_artifacts(id).await.unwrap() {
        let bytes = client.download_artifact(id, &artifact.id).await.unwrap();
        out.push((artifact.name, String::from_utf8_lossy(&bytes).into_owned()));
    }
    out
}
