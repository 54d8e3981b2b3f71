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

pub use job::{HANDED_BACK, Leased, NextClaim, Settled, run_job};
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
    let mut jobs = Jobs {
        running: JoinSet::new(),
        runtimes: limits::RunningRuntimes::default(),
        // A success takes the next job in its completion's call only when every runtime
        // is always offered: under per-runtime limits what to offer depends on the jobs
        // running at that moment, which only this loop knows.
        next: config
            .max_running_per_runtime
            .is_empty()
            .then(|| NextClaim {
                body: claim_body(&config, config.stages.capabilities.clone(), Duration::ZERO),
                stop: stop.clone(),
            }),
        client: client.clone(),
        config: config.clone(),
        hand_back: shutdown.hand_back.clone(),
    };
    let mut backoff = Duration::from_millis(250);
    'claiming: loop {
        // Room for a job, and a runtime to offer for it; else wait for a job to end.
        let capabilities = loop {
            // Jobs that ended since the last pass free their slot and their runtime now:
            // a worker with room would otherwise never look, and a runtime held by a job
            // long done would stay unoffered.
            while let Some(ended) = jobs.running.try_join_next_with_id() {
                jobs.ended(ended);
            }
            config
                .running_jobs
                .store(jobs.running.len(), Ordering::Relaxed);
            let offer = jobs
                .runtimes
                .offer(&config.stages.capabilities, &config.max_running_per_runtime);
            match offer {
                Some(offer) if jobs.running.len() < config.concurrency.max(1) => break offer,
                _ => tokio::select! {
                    _ = stop.cancelled() => break 'claiming,
                    Some(ended) = jobs.running.join_next_with_id() => jobs.ended(ended),
                },
            }
        };
        let params = claim_body(&config, capabilities, config.claim_wait);
        // The lease is counted from here: the server starts it later, when a job comes.
        let claimed_at = Instant::now();
        let claimed = tokio::select! {
            _ = stop.cancelled() => break 'claiming,
            claimed = client.claim(&params) => claimed,
        };
        match claimed {
            Ok(Some(job)) => {
                backoff = Duration::from_millis(250);
                jobs.start(Leased { job, claimed_at });
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
    let mut running = jobs.running;
    if !running.is_empty() {
        tracing::info!(
            jobs = running.len(),
            drain = ?config.drain,
            "stopping: waiting for the running jobs, then handing back the rest"
        );
    }
    tokio::select! {
        _ = join_all(&mut running, &client) => {
            config.running_jobs.store(0, Ordering::Relaxed);
            return;
        }
        _ = tokio::time::sleep(config.drain) => {}
        _ = shutdown.hand_back.cancelled() => {}
    }
    shutdown.hand_back.cancel();
    join_all(&mut running, &client).await;
    config.running_jobs.store(0, Ordering::Relaxed);
}

/// What the claim loop holds: the running jobs, the runtimes they use, and what each needs
/// to start.
struct Jobs {
    /// Each answers the next job its success took, if any.
    running: JoinSet<Option<Leased>>,
    runtimes: limits::RunningRuntimes<tokio::task::Id>,
    next: Option<NextClaim>,
    client: QueueClient,
    config: WorkerConfig,
    hand_back: CancellationToken,
}

impl Jobs {
    fn start(&mut self, leased: Leased) {
        let runtime = limits::runtime_of(&leased.job);
        let (client, config) = (self.client.clone(), self.config.clone());
        let (hand_back, next) = (self.hand_back.clone(), self.next.clone());
        let task = self.running.spawn(async move {
            let Leased { job, claimed_at } = leased;
            let (_, taken) =
                run_job(&client, &config, job, claimed_at, &hand_back, next.as_ref()).await;
            taken
        });
        self.runtimes.started(task.id(), runtime);
        self.config
            .running_jobs
            .store(self.running.len(), Ordering::Relaxed);
    }

    /// A job ended: its runtime is free, and the next job its success took starts in its
    /// place.
    fn ended(&mut self, ended: Result<(tokio::task::Id, Option<Leased>), tokio::task::JoinError>) {
        match ended {
            Ok((id, taken)) => {
                self.runtimes.ended(id);
                if let Some(leased) = taken {
                    self.start(leased);
                }
            }
            Err(error) => self.runtimes.ended(error.id()),
        }
    }
}

/// The claim of a job for a runtime offer, long-polling up to `wait`.
fn claim_body(config: &WorkerConfig, capabilities: Vec<String>, wait: Duration) -> ClaimBody {
    ClaimBody {
        worker_id: None,
        capabilities: Some(capabilities),
        allowed_types: None,
        lease_seconds: Some(config.lease.as_secs().max(1)),
        wait_seconds: (!wait.is_zero()).then_some(wait.as_secs_f64()),
        worker_version: Some(concat!("stepwise-worker ", env!("CARGO_PKG_VERSION")).into()),
        sandbox: Some(config.stages.sandbox.describe()),
        max_running_per_repository: config.max_running_per_repository,
    }
}

/// Waits for every running job to end. A job that a success took after the stop (the stop
/// came while its call was on its way) is handed back at once, never started.
async fn join_all(running: &mut JoinSet<Option<Leased>>, client: &QueueClient) {
    while let Some(ended) = running.join_next().await {
        if let Ok(Some(leased)) = ended {
            hand_back_unstarted(client, &leased.job).await;
        }
    }
}

/// Gives back a job taken after the stop, never started: a retryable failure, as the
/// drain's hand-back is, so that another worker takes it at once.
async fn hand_back_unstarted(client: &QueueClient, job: &contract::Job) {
    if let Err(error) = client.fail(&job.id, job.attempt, HANDED_BACK, true).await {
        tracing::warn!(job = %job.id, %error, "could not hand back a job taken while stopping; it returns to the queue when its lease ends");
    }
}
