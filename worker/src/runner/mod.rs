//! The claim loop: long-polls the server for jobs this worker can run, up to `concurrency`
//! at a time, and runs each through the stages (`job`) while a heartbeat keeps its lease
//! (`lease`), a watcher on the job's event stream turns a cancel request into a stop
//! within moments, and its reports go to the server in order (`upload`).
//! Everything goes through the REST API ([`QueueClient`]), never the database, so the same
//! loop runs on a remote machine and embedded in `stepwise serve`.

mod heartbeat;
mod job;
mod lease;
mod limits;
mod upload;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use contract::api::ClaimBody;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::QueueClient;
use crate::stages::StageConfig;

pub use job::{HANDED_BACK, Settled, run_job};
pub use lease::Lease;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub stages: StageConfig,
    /// Jobs run at once.
    pub concurrency: usize,
    /// At most this many jobs of a runtime (`codex`, `claude`, `gemini`) at once on this
    /// worker; a runtime not named here is bounded by `concurrency` alone.
    pub max_running_per_runtime: BTreeMap<String, usize>,
    /// Sent with each claim: take no job of a repository with this many jobs running
    /// already, on any worker. It can only tighten the server's own limit.
    pub max_running_per_repository: Option<u32>,
    /// How many jobs run now, kept by the claim loop, for whoever reports it (the server's
    /// metrics for its embedded worker).
    pub running_jobs: Arc<AtomicUsize>,
    /// The lease asked for at claim; heartbeats renew it every third of it. A job whose
    /// lease was not renewed in time (the server unreachable) is stopped a margin before
    /// the lease's end, publishing nothing (see [`Lease`]).
    pub lease: Duration,
    /// How long one claim request may wait on the server for a job.
    pub claim_wait: Duration,
    /// Secrets to redact besides the shapes and the job's own (the worker's token, say).
    pub secrets: Vec<String>,
    /// After a stop, how long running jobs may go on before they are handed back.
    pub drain: Duration,
    /// Which workspaces outlive their job. Everything a run produced is on the server by
    /// then (logs, patches, results), so a workspace is only a checkout to look into.
    pub keep_workspaces: KeepWorkspaces,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeepWorkspaces {
    /// Remove every workspace when its job ends.
    Never,
    /// Keep the workspaces of failed jobs, to look into; remove the rest.
    #[default]
    Failed,
    /// Keep them all (disk use grows with every job).
    Always,
}

/// How a worker is told to stop, in two stages.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    /// Claim nothing more; the running jobs get [`WorkerConfig::drain`] to finish.
    pub stop: CancellationToken,
    /// Stop the running agents now and hand their jobs back to the queue (a retryable
    /// failure, so another worker picks them up). The runner fires it when the drain runs
    /// out; a second signal may fire it sooner.
    pub hand_back: CancellationToken,
}

impl WorkerConfig {
    pub fn new(stages: StageConfig) -> WorkerConfig {
        WorkerConfig {
            stages,
            concurrency: 1,
            max_running_per_runtime: BTreeMap::new(),
            max_running_per_repository: None,
            running_jobs: Arc::default(),
            lease: Duration::from_secs(60),
            claim_wait: Duration::from_secs(20),
            secrets: Vec::new(),
            drain: Duration::from_secs(20),
            keep_workspaces: KeepWorkspaces::default(),
        }
    }
}

/// Claims and runs jobs until `shutdown.stop`; then claims no more, gives the jobs it holds
/// the drain time to finish, and hands back those still running.
pub async fn run(client: QueueClient, config: WorkerConfig, shutdown: Shutdown) {
    // Orphans of the jobs' processes come back to this worker to be reaped, from the start.
    crate::process::adopt_orphans();
    let stop = &shutdown.stop;
    let mut running = JoinSet::new();
    let mut runtimes = limits::RunningRuntimes::default();
    let mut backoff = Duration::from_millis(250);
    'claiming: loop {
        // Room for a job, and a runtime to offer for it; else wait for a job to end.
        let capabilities = loop {
            // Jobs that ended since the last pass free their slot and their runtime now:
            // a worker with room would otherwise never look, and a runtime held by a job
            // long done would stay unoffered.
            while let Some(ended) = running.try_join_next_with_id() {
                runtimes.ended(ended.map_or_else(|e| e.id(), |(id, _)| id));
            }
            config.running_jobs.store(running.len(), Ordering::Relaxed);
            let offer =
                runtimes.offer(&config.stages.capabilities, &config.max_running_per_runtime);
            match offer {
                Some(offer) if running.len() < config.concurrency.max(1) => break offer,
                _ => tokio::select! {
                    _ = stop.cancelled() => break 'claiming,
                    Some(ended) = running.join_next_with_id() => {
                        runtimes.ended(ended.map_or_else(|e| e.id(), |(id, _)| id));
                    }
                },
            }
        };
        let params = ClaimBody {
            worker_id: None,
            capabilities: Some(capabilities),
            allowed_types: None,
            lease_seconds: Some(config.lease.as_secs().max(1)),
            wait_seconds: Some(config.claim_wait.as_secs_f64()),
            worker_version: Some(concat!("stepwise-worker ", env!("CARGO_PKG_VERSION")).into()),
            sandbox: Some(config.stages.sandbox.describe()),
            max_running_per_repository: config.max_running_per_repository,
        };
        // The lease is counted from here: the server starts it later, when a job comes.
        let claimed_at = Instant::now();
        let claimed = tokio::select! {
            _ = stop.cancelled() => break 'claiming,
            claimed = client.claim(&params) => claimed,
        };
        match claimed {
            Ok(Some(job)) => {
                backoff = Duration::from_millis(250);
                let runtime = limits::runtime_of(&job);
                let (client, job_config) = (client.clone(), config.clone());
                let hand_back = shutdown.hand_back.clone();
                let task = running.spawn(async move {
                    run_job(&client, &job_config, job, claimed_at, &hand_back).await
                });
                runtimes.started(task.id(), runtime);
                config.running_jobs.store(running.len(), Ordering::Relaxed);
            }
            Ok(None) => backoff = Duration::from_millis(250),
            Err(error) => {
                tracing::warn!(%error, "claiming a job failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => break 'claiming,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
    if !running.is_empty() {
        tracing::info!(
            jobs = running.len(),
            drain = ?config.drain,
            "stopping: waiting for the running jobs, then handing back the rest"
        );
    }
    let drained = async { while running.join_next().await.is_some() {} };
    tokio::select! {
        _ = drained => {
            config.running_jobs.store(0, Ordering::Relaxed);
            return;
        }
        _ = tokio::time::sleep(config.drain) => {}
        _ = shutdown.hand_back.cancelled() => {}
    }
    shutdown.hand_back.cancel();
    while running.join_next().await.is_some() {}
    config.running_jobs.store(0, Ordering::Relaxed);
}
