//! What `stepwise bench queue` is asked (its flags) and the jobs it queues: a leaf, which
//! the phases of its own (`queue.rs`) and the side by side with a peer (`peer.rs`) share.

use clap::{Args, ValueEnum};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Peer {
    GraphileWorker,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    pub(super) backend: Backend,
    /// Jobs per throughput phase.
    #[arg(long, default_value_t = 5000)]
    pub(super) jobs: usize,
    /// Concurrent workers in the throughput phases.
    #[arg(long, default_value_t = 4)]
    pub(super) workers: usize,
    /// Concurrent producers in the end-to-end phase (clients submitting tasks).
    #[arg(long, default_value_t = 2)]
    pub(super) producers: usize,
    /// Jobs per claim and per completion in the batched phase.
    #[arg(long, default_value_t = 32)]
    pub(super) batch: u32,
    /// Jobs timed in the latency phase.
    #[arg(long, default_value_t = 500)]
    pub(super) samples: usize,
    /// For `--backend postgres`: a server where this user may create (and drop) a scratch
    /// database. The default skips TLS, as graphile-worker's client does by default: on
    /// loopback, encryption only adds CPU to what is compared.
    #[arg(
        long,
        env = "STEPWISE_BENCH_PG_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
        hide_env_values = true
    )]
    pub(super) pg_url: String,
    /// Run the queue with this limit of running jobs per repository, as `stepwise serve
    /// --max-running-per-repository N` does; 0: no limit, the default of both.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(super) max_running_per_repository: u32,
    /// Also run graphile-worker's claim + complete phases on the same PostgreSQL,
    /// alternating with ours, and print the two side by side (`--backend postgres`; only
    /// these phases run).
    #[arg(long, value_enum)]
    pub(super) peer: Option<Peer>,
    /// Where the peer's script and its npm packages are; default `bench/graphile-worker`.
    #[arg(long, value_name = "DIR")]
    pub(super) peer_dir: Option<std::path::PathBuf>,
    /// Rounds of the side-by-side comparison.
    #[arg(long, default_value_t = 3)]
    pub(super) rounds: usize,
    /// Seconds of quiet before and after each side-by-side phase, for every PostgreSQL
    /// process to report its WAL flushes (each does within ten seconds of going idle);
    /// with 0 the flushes per job miss what was not reported yet.
    #[arg(long, default_value_t = 11, value_name = "SECONDS")]
    pub(super) settle_secs: u64,
}

/// The repositories the jobs are spread over, so that a limit per repository leaves the
/// workers room (with no limit, which repository a job names costs nothing).
pub(super) const REPOSITORIES: usize = 64;

pub(super) fn noop_task(i: usize) -> serde_json::Value {
    let repository = format!("bench/r{}", i % REPOSITORIES);
    json!({ "payload": { "repository": repository, "task": { "instructions": format!("no-op {i}"), "publish": { "mode": "none" } } } })
}
