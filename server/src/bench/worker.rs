//! `stepwise bench worker`: figures for the worker, printed, never asserted.
//!
//! A scratch SQLite queue behind the real API on a socket, and the real claim loop running a
//! scripted agent (`--agent`, by default the repository's test fixture) as `claude`:
//!
//! 1. prepare, cold and warm: the `moonmind.task.prepare` stage's own duration for the first
//!    job on each of a few generated repositories (clone from scratch), then for later jobs
//!    on the same ones (warm mirror);
//! 2. cancel → SIGTERM: a job's step arms a SIGTERM handler that writes the time the signal
//!    arrived; the time is taken just before the user's cancel request is sent;
//! 3. many jobs at once on one `stepwise worker` process: its memory and CPU per running
//!    job (`concurrent.rs`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use contract::job::task;
use queue::{Database, Queue, QueueConfig, Role, TokenKind};
use worker::client::QueueClient;
use worker::git::MirrorCache;
use worker::process::Limits;
use worker::publish::Identity;
use worker::runner::{Shutdown, WorkerConfig};
use worker::runtime::Binaries;
use worker::stages::StageConfig;

use super::concurrent::{self, Concurrent};
use super::jobs::{bench_err, generate_repo, submit, until_logged, until_terminal};
use super::queue::{percentile, serve_api};
use crate::cli::error::CliError;
use crate::http::auth::{Scope, mint};

#[derive(Debug, Args)]
pub struct WorkerBenchArgs {
    /// Cancels timed.
    #[arg(long, default_value_t = 30)]
    cancels: usize,
    /// Repositories generated for the prepare phase (one cold prepare each).
    #[arg(long, default_value_t = 3)]
    repos: usize,
    /// Warm prepares timed per repository.
    #[arg(long, default_value_t = 3)]
    warm: usize,
    /// Files in each generated repository (4 KiB each, over a few commits).
    #[arg(long, default_value_t = 2000)]
    files: usize,
    /// The scripted agent to run as `claude`; it must understand `@fake` directives.
    #[arg(long, default_value = "worker/tests/fixtures/fake-agent")]
    agent: PathBuf,
    /// Jobs run at once on one worker process, for its memory and CPU per running job (0:
    /// skip the phase).
    #[arg(long, default_value_t = 50)]
    concurrent: usize,
    /// How long those running jobs are sampled, in seconds.
    #[arg(long, default_value_t = 10)]
    sample_seconds: u64,
    /// The stepwise binary whose `worker` runs them [default: this one].
    #[arg(long)]
    worker_bin: Option<PathBuf>,
}

pub async fn run(args: WorkerBenchArgs) -> Result<(), CliError> {
    if args.cancels == 0 || args.repos == 0 {
        return Err(CliError::Usage(
            "--cancels and --repos must be at least 1".into(),
        ));
    }
    let agent = std::fs::canonicalize(&args.agent).map_err(|e| {
        CliError::Usage(format!(
            "--agent {}: {e}; run from the repository root or point --agent at worker/tests/fixtures/fake-agent",
            args.agent.display()
        ))
    })?;
    let root = std::env::temp_dir().join(format!("stepwise-bench-worker-{}", std::process::id()));
    let outcome = measure(&args, &agent, &root).await;
    let _ = std::fs::remove_dir_all(&root);
    outcome
}

async fn measure(args: &WorkerBenchArgs, agent: &Path, root: &Path) -> Result<(), CliError> {
    let queue = Queue::open(
        Database::open_data_dir(&root.join("data")).await?,
        QueueConfig::new(root.join("data/artifacts")),
    )
    .await?;
    queue.migrate().await?;
    let (url, server) = serve_api(&queue).await?;

    let token = |name: &str, kind: TokenKind, role: Option<Role>| {
        let queue = queue.clone();
        let name = name.to_string();
        async move {
            let scope = match role {
                Some(role) => Scope::user(role),
                None => Scope::any_worker(),
            };
            let minted = mint(&name, kind, scope).map_err(|e| bench_err(e.code()))?;
            queue.create_token(minted.record).await?;
            Ok::<_, CliError>(minted.secret)
        }
    };
    let user_secret = token("bench-user", TokenKind::User, Some(Role::Operator)).await?;
    let worker_secret = token("bench-worker", TokenKind::Worker, None).await?;
    let user = QueueClient::new(&url, &user_secret).map_err(bench_err)?;
    let worker = QueueClient::new(&url, &worker_secret).map_err(bench_err)?;

    let stages = StageConfig {
        mirrors: MirrorCache::new(root.join("work/mirrors")),
        workdir: root.join("work/jobs"),
        skills_dir: root.join("skills"),
        binaries: Binaries {
            claude: agent.to_path_buf(),
            ..Binaries::default()
        },
        endpoints: Default::default(),
        logins: None,
        limits: Limits {
            timeout: Duration::from_secs(120),
            grace: Duration::from_secs(2),
        },
        prepare_timeout: Duration::from_secs(120),
        publish_timeout: Duration::from_secs(120),
        github: "https://github.com".into(),
        identity: Identity::default(),
        gh: "gh".into(),
        capabilities: vec!["claude".into(), "git".into()],
        // The figures are the worker's own costs; `bench sandbox` measures the box's.
        sandbox: worker::sandbox::Sandbox::off(),
        engine: None,
    };
    let mut config = WorkerConfig::new(stages);
    config.secrets.push(worker_secret);
    let shutdown = Shutdown::default();
    let runner = tokio::spawn(worker::runner::run(worker, config, shutdown.clone()));

    println!(
        "worker bench: {} repositories of {} files, {} warm prepares each, {} cancels",
        args.repos, args.files, args.warm, args.cancels
    );
    let mut outcome = phases(args, &user, root).await;
    shutdown.stop.cancel();
    shutdown.hand_back.cancel();
    let _ = runner.await;
    if outcome.is_ok() && args.concurrent > 0 {
        // A worker token of its own, so that the phase's worker is the only one.
        let secret = token("bench-worker-concurrent", TokenKind::Worker, None).await?;
        let binary = super::binary_or_this(args.worker_bin.as_deref())?;
        let phase = Concurrent {
            jobs: args.concurrent,
            seconds: args.sample_seconds,
            binary: &binary,
            agent,
            server: &url,
            token: &secret,
            root,
        };
        outcome = concurrent::run(phase, &user).await;
    }
    server.abort();
    outcome
}

async fn phases(args: &WorkerBenchArgs, user: &QueueClient, root: &Path) -> Result<(), CliError> {
    let started = Instant::now();
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for r in 0..args.repos {
        let repo = generate_repo(&root.join(format!("repos/{r}")), args.files)?;
        for run in 0..=args.warm {
            let job = submit(user, &repo, "@fake say hi").await?;
            let ended = until_terminal(user, &job).await?;
            if ended.status != contract::JobState::Succeeded {
                return Err(bench_err(format!(
                    "a prepare job ended {}: {:?}",
                    ended.status.as_str(),
                    ended.error_message
                )));
            }
            let ms = prepare_ms(user, &job).await?;
            if run == 0 {
                cold.push(ms)
            } else {
                warm.push(ms)
            }
        }
    }
    cold.sort_by(f64::total_cmp);
    warm.sort_by(f64::total_cmp);
    println!(
        "prepare, cold clone:   p50 {:>8.1} ms   max {:>8.1} ms   ({} runs)",
        percentile(&cold, 50.0),
        percentile(&cold, 100.0),
        cold.len()
    );
    println!(
        "prepare, warm mirror:  p50 {:>8.1} ms   max {:>8.1} ms   ({} runs)",
        percentile(&warm, 50.0),
        percentile(&warm, 100.0),
        warm.len()
    );

    let repo = generate_repo(&root.join("repos/cancel"), 10)?;
    let mut stops = Vec::with_capacity(args.cancels);
    for i in 0..args.cancels {
        let mark = root.join(format!("term-{i}"));
        let step = format!(
            "@fake on-term {}\n@fake say armed\n@fake sleep 120",
            mark.display()
        );
        let job = submit(user, &repo, &step).await?;
        until_logged(user, &job, "armed").await?;
        let asked = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(bench_err)?
            .as_secs_f64();
        user.cancel_job(&job.id, Some("bench"))
            .await
            .map_err(bench_err)?;
        let ended = until_terminal(user, &job).await?;
        let arrived: f64 = std::fs::read_to_string(&mark)
            .map_err(|e| {
                bench_err(format!(
                    "the agent recorded no SIGTERM ({e}); job ended {}",
                    ended.status.as_str()
                ))
            })?
            .trim()
            .parse()
            .map_err(bench_err)?;
        stops.push((arrived - asked) * 1000.0);
    }
    stops.sort_by(f64::total_cmp);
    println!(
        "cancel request → SIGTERM at the agent: p50 {:.1} ms   p99 {:.1} ms   max {:.1} ms   ({} runs)",
        percentile(&stops, 50.0),
        percentile(&stops, 99.0),
        percentile(&stops, 100.0),
        stops.len()
    );
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The prepare stage's own duration, from its finished event.
async fn prepare_ms(user: &QueueClient, job: &contract::Job) -> Result<f64, CliError> {
    let events = user
        .list_events(&job.id, None, Some(500))
        .await
        .map_err(bench_err)?;
    events
        .iter()
        .find(|e| e.kind == task::STAGE_FINISHED && e.payload["stage"] == task::STAGE_PREPARE)
        .and_then(|e| e.payload["durationMs"].as_f64())
        .ok_or_else(|| bench_err(format!("job {} has no prepare duration", job.id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_small_worker_bench_runs_every_phase() {
        let args = WorkerBenchArgs {
            cancels: 2,
            repos: 1,
            warm: 1,
            files: 20,
            agent: worker::testing::fixture("fake-agent"),
            concurrent: 3,
            sample_seconds: 1,
            worker_bin: Some(crate::bench::built_binary()),
        };
        run(args).await.unwrap();
    }
}
