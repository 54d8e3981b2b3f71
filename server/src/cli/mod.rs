//! The `stepwise` command line: one module per command, and the errors they share.

pub mod config;
pub mod db;
pub mod defaults;
pub mod error;
pub mod github;
mod jobs;
mod mcp;
mod migrate;
pub mod notify;
pub mod retention;
mod schedules;
mod serve;
mod signal;
mod tokens;
pub mod worker;

use clap::{Parser, Subcommand};

use config::{Config, ServeArgs};
use db::DbArgs;
pub use error::{CliError, ConfigError};
use jobs::{JobsCommand, SubmitArgs};
use tokens::TokenCommand;

/// stepwise: a queue for coding-agent tasks.
#[derive(Debug, Parser)]
#[command(name = "stepwise", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Built once per process, so a variant's size costs nothing worth boxing it for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Bring the database schema up to date (`serve` does this too, at start).
    Migrate(DbArgs),
    /// Manage API tokens: create (shown once), list, revoke.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Serve the dashboard and API, with a worker inside (unless --no-worker).
    ///
    /// The task defaults fill what a task leaves out. A blank one is unset; an invalid one
    /// stops the start.
    Serve(ServeArgs),
    /// Submit a task to a running server: a JSON job request, or one built from flags.
    ///
    /// Talks to --server (STEPWISE_SERVER) with --token (STEPWISE_TOKEN), like every
    /// `jobs` command. Prints the job's id, status and page; --json prints the whole job.
    Submit(SubmitArgs),
    /// Read and cancel jobs on a running server: list, show, cancel, events (--follow).
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Recurring tasks on a running server: create, list, show, pause, resume, delete.
    #[command(subcommand)]
    Schedules(schedules::SchedulesCommand),
    /// Serve MCP over stdio, for an agent or IDE that starts it as a process.
    ///
    /// Reaches --server (STEPWISE_SERVER) over REST with --token (STEPWISE_TOKEN), like the
    /// `jobs` commands. The server itself serves MCP over HTTP at /mcp.
    Mcp(mcp::McpArgs),
    /// Run tasks: claim jobs from a server and run their steps with the agent CLIs here.
    ///
    /// Takes --server (STEPWISE_SERVER) and a worker token, --token (STEPWISE_WORKER_TOKEN).
    /// SIGTERM or Ctrl-C stops claiming; the jobs already running finish first.
    Worker(worker::WorkerArgs),
    /// Measure the queue and print the figures (throughput, enqueue → claim latency).
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[cfg(feature = "bench")]
#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Enqueue, claim and complete no-op jobs on a scratch database; time a long-polling worker.
    Queue(crate::bench::queue::BenchArgs),
    /// Run jobs through the real worker with a scripted agent; time prepare (cold clone vs
    /// warm mirror) and cancel request → SIGTERM at the agent.
    Worker(crate::bench::worker::WorkerBenchArgs),
    /// Put a million jobs and a job of 100,000 log lines in a scratch database; time the
    /// jobs list, the job page, the events API and stream, and retention.
    Scale(crate::bench::scale::ScaleArgs),
    /// Hold `bench scale`'s event streams, in a process apart from the server it measures.
    #[command(hide = true)]
    WatchersClient(crate::bench::watch_client::WatchersArgs),
    /// Start `true` through the worker's process policy with the sandbox off and in its
    /// bubblewrap box, alternately; print the box's cost per step (p50 / p99).
    Sandbox(crate::bench::sandbox::SandboxBenchArgs),
}

impl Cli {
    pub async fn run(self) -> Result<(), CliError> {
        match self.command {
            Command::Serve(args) => {
                let config = Config::load(args, |name| std::env::var(name).ok())?;
                serve::run(config).await
            }
            Command::Migrate(db) => migrate::run(db).await,
            Command::Token(command) => command.run().await,
            Command::Submit(args) => {
                jobs::ignore_broken_pipe(args.run(&mut std::io::stdout()).await)?;
                Ok(())
            }
            Command::Jobs(command) => {
                jobs::ignore_broken_pipe(command.run(&mut std::io::stdout()).await)?;
                Ok(())
            }
            Command::Schedules(command) => {
                jobs::ignore_broken_pipe(command.run(&mut std::io::stdout()).await)?;
                Ok(())
            }
            #[cfg(feature = "bench")]
            Command::Bench(BenchCommand::Queue(args)) => crate::bench::queue::run(args).await,
            #[cfg(feature = "bench")]
            Command::Bench(BenchCommand::Worker(args)) => crate::bench::worker::run(args).await,
            #[cfg(feature = "bench")]
            Command::Bench(BenchCommand::Scale(args)) => crate::bench::scale::run(args).await,
            #[cfg(feature = "bench")]
            Command::Bench(BenchCommand::Sandbox(args)) => crate::bench::sandbox::run(args).await,
            #[cfg(feature = "bench")]
            Command::Bench(BenchCommand::WatchersClient(args)) => {
                crate::bench::watch_client::run(args).await
            }
            Command::Worker(args) => worker::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
        }
    }
}

/// Logs go to stderr, filtered by RUST_LOG (default: info for stepwise, warn otherwise).
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,stepwise=info,queue=info,worker=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
