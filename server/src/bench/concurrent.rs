//! `stepwise bench worker`, last phase: many jobs running at once on one `stepwise worker`
//! process, and what each costs that process while its agent talks: resident memory and
//! CPU, read from `/proc`. The worker runs as users run it, a process of its own, so that
//! the figures are its own and not the server's.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use worker::client::QueueClient;

use super::jobs::{bench_err, generate_repo, submit, until_logged, until_terminal};
use super::procfs::{cpu_seconds, rss_kib};
use crate::cli::error::CliError;

/// What the phase runs: `jobs` at once, sampled for `seconds`, on `binary`'s `worker`.
pub(super) struct Concurrent<'a> {
    pub jobs: usize,
    pub seconds: u64,
    pub binary: &'a Path,
    pub agent: &'a Path,
    pub server: &'a str,
    pub token: &'a str,
    pub root: &'a Path,
}

pub(super) async fn run(phase: Concurrent<'_>, user: &QueueClient) -> Result<(), CliError> {
    let repo = generate_repo(&phase.root.join("repos/concurrent"), 10)?;
    let mut child = tokio::process::Command::new(phase.binary)
        .arg("worker")
        .arg("--server")
        .arg(phase.server)
        .arg("--concurrency")
        .arg(phase.jobs.to_string())
        .arg("--claude-bin")
        .arg(phase.agent)
        .arg("--workdir")
        .arg(phase.root.join("work/concurrent"))
        .arg("--skills-dir")
        .arg(phase.root.join("skills"))
        .args(["--capability", "claude", "--capability", "git"])
        .env("STEPWISE_WORKER_TOKEN", phase.token)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| bench_err(format!("{} worker: {e}", phase.binary.display())))?;
    let pid = child
        .id()
        .ok_or_else(|| bench_err("the worker exited at once"))?;

    // Idle: the worker is up and long-polling, with nothing to run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss_kib(pid)?;

    // Each job's agent says a line a second for longer than the sampling lasts.
    let mut step = String::from("@fake say started\n");
    for tick in 0..phase.seconds + 60 {
        step.push_str(&format!("@fake sleep 1\n@fake say tick {tick}\n"));
    }
    let mut jobs = Vec::with_capacity(phase.jobs);
    for _ in 0..phase.jobs {
        jobs.push(submit(user, &repo, &step).await?);
    }
    let started = Instant::now();
    for job in &jobs {
        if let Some(status) = child.try_wait().map_err(bench_err)? {
            return Err(bench_err(format!("the worker exited ({status})")));
        }
        until_logged(user, job, "started").await?;
    }
    let ramp = started.elapsed();

    let cpu_before = cpu_seconds(pid)?;
    let sampled = Instant::now();
    let mut peak = 0;
    while sampled.elapsed() < Duration::from_secs(phase.seconds) {
        peak = peak.max(rss_kib(pid)?);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let cpu = (cpu_seconds(pid)? - cpu_before) / sampled.elapsed().as_secs_f64();

    for job in &jobs {
        user.cancel_job(&job.id, Some("bench"))
            .await
            .map_err(bench_err)?;
    }
    for job in &jobs {
        until_terminal(user, job).await?;
    }
    let _ = child.kill().await;

    let n = phase.jobs as f64;
    println!(
        "{} jobs at once on one worker process (all running after {:.1} s; sampled {} s, \
         each agent saying a line a second):",
        phase.jobs,
        ramp.as_secs_f64(),
        phase.seconds
    );
    println!(
        "  worker RSS: idle {:.1} MiB, running {:.1} MiB peak = {:.0} KiB per running job",
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        peak.saturating_sub(idle) as f64 / n
    );
    println!(
        "  worker CPU: {:.1} % of a core = {:.2} % per running job",
        cpu * 100.0,
        cpu * 100.0 / n
    );
    Ok(())
}
