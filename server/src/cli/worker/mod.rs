//! `stepwise worker`: the claim loop on this machine, talking to a server over its API; and
//! the same loop embedded in `stepwise serve`, which talks to its own API with a worker
//! token it mints at start.

use std::path::Path;

use clap::Args;
use queue::{Queue, TokenKind};
use worker::client::QueueClient;
use worker::runner::{self, Shutdown, WorkerConfig};

use super::error::CliError;
use super::signal::shutdown_signal;
use crate::http::auth::{Scope, mint};

mod agent;
mod sandbox;

pub use agent::AgentArgs;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The server to take jobs from. Repeat it (or give a comma list) for replicas of one
    /// server on one database: the worker uses the first until it cannot be reached, then
    /// the next. A load balancer in front of the replicas is the other way.
    #[arg(
        long,
        env = "STEPWISE_SERVER",
        default_value = "http://127.0.0.1:3000",
        value_delimiter = ','
    )]
    server: Vec<String>,
    /// A worker token (`stepwise token create --kind worker`); its name is this worker's id.
    #[arg(long, env = "STEPWISE_WORKER_TOKEN", hide_env_values = true)]
    token: String,
    /// Answer `GET /healthz` (the process is up) and `GET /readyz` (a server answers ready
    /// and this worker is not stopping) on this port, on every interface, for a container
    /// orchestrator. They take no token and tell nothing but whether, and why not.
    #[arg(long, env = "STEPWISE_WORKER_HEALTH_PORT")]
    health_port: Option<u16>,
    /// Take no job of a repository with N jobs running already, on any worker: a limit of
    /// this worker's own, which can only tighten the server's `--max-running-per-repository`.
    #[arg(
        long,
        env = "STEPWISE_WORKER_MAX_RUNNING_PER_REPOSITORY",
        value_name = "N"
    )]
    max_running_per_repository: Option<u32>,
    #[command(flatten)]
    agent: AgentArgs,
}

/// `stepwise worker`: claims and runs jobs until a signal, serving its probes if asked.
pub async fn run(args: WorkerArgs) -> Result<(), CliError> {
    let servers: Vec<&str> = args.server.iter().map(String::as_str).collect();
    let client = QueueClient::with_servers(&servers, &args.token)
        .map_err(|e| CliError::Usage(format!("--server / --token: {e}")))?;
    let mut config = args.agent.ready(Path::new("."), &args.token, "").await?;
    if args.max_running_per_repository == Some(0) {
        return Err(CliError::Usage(
            "--max-running-per-repository must be 1 or more (leave it out for the server's limit alone)"
                .into(),
        ));
    }
    config.max_running_per_repository = args.max_running_per_repository;
    announce(&args.server.join(", "), &config);
    let shutdown = Shutdown::default();
    if let Some(port) = args.health_port {
        serve_probes(port, client.clone(), shutdown.clone()).await?;
    }
    tokio::spawn(signals(shutdown.clone()));
    runner::run(client, config, shutdown).await;
    Ok(())
}

/// The worker's `/healthz` and `/readyz` on `port`: ready while a server is and the
/// worker is not stopping.
async fn serve_probes(port: u16, client: QueueClient, shutdown: Shutdown) -> Result<(), CliError> {
    let addr = std::net::SocketAddr::from(([0, 0, 0, 0], port));
    crate::http::health::serve_probes(addr, move || {
        let client = client.clone();
        let stopping = shutdown.stop.is_cancelled();
        async move {
            if stopping {
                return contract::api::Health::unavailable(
                    "the worker is stopping: it takes no new jobs",
                );
            }
            client.server_readiness().await
        }
    })
    .await
    .map_err(|source| CliError::Bind {
        addr: addr.to_string(),
        source,
    })
}

fn announce(server: &str, config: &WorkerConfig) {
    let capabilities = &config.stages.capabilities;
    let sandbox = config.stages.sandbox.describe();
    tracing::info!(%server, ?capabilities, concurrency = config.concurrency, %sandbox, "worker started");
    if !config.stages.sandbox.is_on() {
        tracing::warn!(
            "--sandbox off: agent steps and checks run as this user, with its files, its processes and its network in reach; only their environment is filtered"
        );
    }
    if capabilities.is_empty() {
        tracing::warn!(
            "this worker offers no capabilities: no agent CLI or git was found on PATH, so no task can be claimed"
        );
    }
}

/// The first SIGTERM or Ctrl-C stops claiming and lets running jobs drain; a second one
/// hands them back at once.
async fn signals(shutdown: Shutdown) {
    shutdown_signal().await;
    tracing::info!("stopping: no new jobs; running ones may finish, then are handed back");
    shutdown.stop.cancel();
    shutdown_signal().await;
    tracing::info!("stopping now: handing back the running jobs");
    shutdown.hand_back.cancel();
}

/// The name of the embedded worker's token, and so its worker id: one per host and port,
/// so replicas on one database do not take each other's.
fn embedded_name(port: u16) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("embedded@{host}:{port}")
}

/// Starts the worker inside `serve`: mints a fresh worker token (revoking the one a
/// previous start left, whose secret died with that process) and runs the claim loop
/// against this server's own API until `shutdown`.
pub async fn start_embedded(
    queue: &Queue,
    base_url: &str,
    port: u16,
    home: &Path,
    agent: AgentArgs,
    shutdown: Shutdown,
    running_jobs: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Result<tokio::task::JoinHandle<()>, CliError> {
    let name = embedded_name(port);
    for old in queue.list_tokens().await? {
        if old.name == name && old.kind == TokenKind::Worker && old.revoked_at.is_none() {
            queue.revoke_token(&old.id).await?;
        }
    }
    let minted = mint(&name, TokenKind::Worker, Scope::any_worker()).map_err(|e| {
        CliError::Usage(format!(
            "cannot mint the embedded worker's token: {}",
            e.code()
        ))
    })?;
    queue.create_token(minted.record).await?;
    let client = QueueClient::new(base_url, &minted.secret)
        .map_err(|e| CliError::Usage(format!("the embedded worker's server URL: {e}")))?;
    let mut config = agent
        .ready(
            home,
            &minted.secret,
            " (or --no-worker, to serve without running jobs here)",
        )
        .await?;
    config.running_jobs = running_jobs;
    announce(base_url, &config);
    Ok(tokio::spawn(runner::run(client, config, shutdown)))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use contract::JobState;
    use queue::Role;
    use serde_json::json;

    use super::*;
    use crate::testing::server::start;

    #[tokio::test]
    async fn the_embedded_worker_runs_jobs_with_a_token_of_its_own_that_each_start_replaces() {
        let server = start().await;
        let tmp = tempfile::tempdir().unwrap();
        let remote = worker::testing::remote(tmp.path());
        let mut agent = AgentArgs::defaults();
        agent.claude_bin = worker::testing::fixture("fake-agent");
        agent.capabilities = vec!["claude".into(), "git".into()];
        agent.grace_seconds = 1;
        let queue = server.queue();

        let first = Shutdown::default();
        let run = start_embedded(
            queue,
            &server.url(),
            3000,
            tmp.path(),
            agent.clone(),
            first.clone(),
            Default::default(),
        )
        .await
        .unwrap();
        first.stop.cancel();
        run.await.unwrap();
        let second = Shutdown::default();
        let _run = start_embedded(
            queue,
            &server.url(),
            3000,
            tmp.path(),
            agent,
            second.clone(),
            Default::default(),
        )
        .await
        .unwrap();
        let tokens = queue.list_tokens().await.unwrap();
        let name = embedded_name(3000);
        let embedded: Vec<_> = tokens.iter().filter(|t| t.name == name).collect();
        assert_eq!(embedded.len(), 2, "{tokens:?}");
        assert_eq!(
            embedded.iter().filter(|t| t.revoked_at.is_none()).count(),
            1,
            "the first start's token must be revoked: {embedded:?}"
        );

        let user = server.user(Role::Operator).await;
        let job = user
            .create_job(&json!({ "payload": {
                "repository": remote,
                "task": {
                    "instructions": "@fake write hi.txt hi",
                    "runtime": { "mode": "claude" },
                    "publish": { "mode": "none" },
                },
            }}))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let done = loop {
            let job = user.get_job(&job.id).await.unwrap();
            if job.status.is_terminal() {
                break job;
            }
            assert!(Instant::now() < deadline, "the job never ended: {job:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(done.status, JobState::Succeeded, "{done:?}");
        assert_eq!(done.claimed_by.as_deref(), Some(name.as_str()));
        // Its workspaces live under the data dir it was given; a succeeded job's is removed.
        assert!(tmp.path().join("work/jobs").is_dir());
        let workspace = tmp.path().join("work/jobs").join(job.id.to_string());
        let deadline = Instant::now() + Duration::from_secs(10);
        while workspace.exists() {
            assert!(
                Instant::now() < deadline,
                "{} was kept",
                workspace.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        second.stop.cancel();
    }
}
