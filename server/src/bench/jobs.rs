//! The jobs the benches make and follow, and their one error: a leaf the worker bench, its
//! many-jobs phase (`concurrent.rs`), `procfs.rs`, the scale bench and its watchers share.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use contract::JobId;
use contract::job::task;
use serde_json::{Value, json};
use worker::client::QueueClient;

use crate::cli::error::CliError;

/// A bench's failure, as the command reports it.
pub(super) fn bench_err(e: impl std::fmt::Display) -> CliError {
    CliError::Bench(e.to_string())
}

pub(super) async fn submit(
    user: &QueueClient,
    repo: &Path,
    step: &str,
) -> Result<contract::Job, CliError> {
    let request = json!({ "payload": {
        "repository": repo.display().to_string(),
        "task": {
            "instructions": "bench",
            "runtime": { "mode": "claude" },
            "publish": { "mode": "none" },
            "steps": [{ "instructions": step }],
        },
    }});
    user.create_job(&request).await.map_err(bench_err)
}

pub(super) async fn until_terminal(
    user: &QueueClient,
    job: &contract::Job,
) -> Result<contract::Job, CliError> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let current = user.get_job(&job.id).await.map_err(bench_err)?;
        if current.status.is_terminal() {
            return Ok(current);
        }
        if Instant::now() > deadline {
            return Err(bench_err(format!("job {} did not end in 300 s", job.id)));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for the step to print `text`, so the agent is surely running (and armed).
pub(super) async fn until_logged(
    user: &QueueClient,
    job: &contract::Job,
    text: &str,
) -> Result<(), CliError> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let events = user
            .list_events(&job.id, None, Some(500))
            .await
            .map_err(bench_err)?;
        if events
            .iter()
            .any(|e| e.kind == task::STEP_LOG && e.message.contains(text))
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(bench_err(format!("job {} never printed {text:?}", job.id)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<(), CliError> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| bench_err(format!("git: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(bench_err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// A bare repository with `files` files of 4 KiB, committed over five commits.
pub(super) fn generate_repo(dir: &Path, files: usize) -> Result<PathBuf, CliError> {
    let seed = dir.join("seed");
    let bare = dir.join("remote.git");
    std::fs::create_dir_all(&seed).map_err(bench_err)?;
    git(&seed, &["init", "--quiet", "--initial-branch=main"])?;
    let per_commit = files.div_ceil(5).max(1);
    for (n, chunk) in (0..files.max(1))
        .collect::<Vec<_>>()
        .chunks(per_commit)
        .enumerate()
    {
        for &i in chunk {
            let body: String = (0..64)
                .map(|line| format!("file {i} line {line:03} {}\n", "x".repeat(40)))
                .collect();
            let path = seed.join(format!("src/{}/f{i}.txt", i % 50));
            std::fs::create_dir_all(path.parent().unwrap_or(&seed)).map_err(bench_err)?;
            std::fs::write(path, body).map_err(bench_err)?;
        }
        git(&seed, &["add", "."])?;
        git(&seed, &["commit", "--quiet", "-m", &format!("commit {n}")])?;
    }
    git(dir, &["clone", "--quiet", "--bare", "seed", "remote.git"])?;
    Ok(bare)
}

pub(super) fn task(title: &str) -> Value {
    json!({ "payload": { "repository": "bench/scale", "task": {
        "instructions": title, "steps": [{ "instructions": "talk a lot" }],
        "publish": { "mode": "none" } } } })
}

/// A job claimed by a bench worker, and its fence.
pub(super) async fn claimed(
    queue: &queue::Queue,
    title: &str,
) -> Result<(JobId, queue::Fence), CliError> {
    let job = queue.create_job(&task(title), Some("bench")).await?;
    let request = queue::ClaimRequest {
        worker_id: "bench-scale".into(),
        capabilities: vec!["codex".into(), "git".into()],
        allowed_types: None,
        allowed_repositories: None,
        lease: Duration::from_secs(3600),
        max_running_per_repository: None,
    };
    let claimed = queue
        .claim(&request)
        .await?
        .ok_or_else(|| CliError::Bench("the bench's job was not claimed".into()))?;
    let fence = queue::Fence::of(&claimed)
        .ok_or_else(|| CliError::Bench("a claimed job without a lease".into()))?;
    Ok((job.id, fence))
}
