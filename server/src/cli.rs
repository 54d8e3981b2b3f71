use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, ConfigError};
use crate::jobs_cli::{self, JobsCommand, SubmitArgs};
use crate::serve;
use crate::tokens::TokenCommand;

/// stepwise: a queue for coding-agent tasks.
#[derive(Debug, Parser)]
#[command(name = "stepwise", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Bring the database schema up to date (`serve` does this too, at start).
    Migrate(DbArgs),
    /// Manage API tokens: create (shown once), list, revoke.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Serve the dashboard and API, with a worker inside (unless --no-worker).
    ///
    /// Task defaults come from the environment: STEPWISE_DEFAULT_PUBLISH_MODE (none, branch
    /// or pr; default pr; MOONMIND_DEFAULT_PUBLISH_MODE is honoured as an alias),
    /// STEPWISE_DEFAULT_RUNTIME (codex, claude or gemini; default codex), and per runtime
    /// STEPWISE_{CODEX,CLAUDE,GEMINI}_{MODEL,EFFORT}. An invalid value stops the start.
    Serve(ServeArgs),
    /// Submit a task to a running server: a JSON job request, or one built from flags.
    ///
    /// Talks to --server (STEPWISE_SERVER) with --token (STEPWISE_TOKEN), like every
    /// `jobs` command. Prints the job's id, status and page; --json prints the whole job.
    Submit(SubmitArgs),
    /// Read and cancel jobs on a running server: list, show, cancel, events (--follow).
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Run tasks: claim jobs from a server and run their steps with the agent CLIs here.
    ///
    /// Takes --server (STEPWISE_SERVER) and a worker token, --token (STEPWISE_WORKER_TOKEN).
    /// SIGTERM or Ctrl-C stops claiming; the jobs already running finish first.
    Worker(crate::worker_cli::WorkerArgs),
    /// Measure the queue and print the figures (throughput, enqueue → claim latency).
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Enqueue, claim and complete no-op jobs on a scratch database; time a long-polling worker.
    Queue(crate::bench::BenchArgs),
    /// Run jobs through the real worker with a scripted agent; time prepare (cold clone vs
    /// warm mirror) and cancel request → SIGTERM at the agent.
    Worker(crate::bench_worker::WorkerBenchArgs),
}

/// Where the state lives; shared by every command that opens the database.
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Where stepwise keeps its state: the SQLite database and job artifacts.
    #[arg(long, env = "STEPWISE_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// A PostgreSQL URL (postgres://…) to use instead of the embedded SQLite database.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, env = "STEPWISE_HOST", default_value = "127.0.0.1")]
    pub host: String,
    /// The port to listen on.
    #[arg(long, short, env = "STEPWISE_PORT", default_value_t = 3000)]
    pub port: u16,
    #[command(flatten)]
    pub db: DbArgs,
    /// The built site (wasm, JS, CSS); by default the one cargo-leptos built beside the binary.
    #[arg(long, env = "LEPTOS_SITE_ROOT")]
    pub site_root: Option<PathBuf>,
    /// Run no worker inside the server: jobs then wait for `stepwise worker` processes.
    #[arg(long, env = "STEPWISE_NO_WORKER")]
    pub no_worker: bool,
    /// The embedded worker, configured like `stepwise worker`.
    #[command(flatten, next_help_heading = "Embedded worker")]
    pub worker: crate::worker_cli::AgentArgs,
}

impl Cli {
    pub async fn run(self) -> Result<(), CliError> {
        match self.command {
            Command::Serve(args) => {
                let config = Config::load(args, |name| std::env::var(name).ok())?;
                serve::run(config).await
            }
            Command::Migrate(db) => {
                let queue = serve::open_queue(&db, contract::Defaults::default()).await?;
                println!("the {} database is up to date", queue.database().backend());
                Ok(())
            }
            Command::Token(command) => command.run().await,
            Command::Submit(args) => {
                jobs_cli::ignore_broken_pipe(args.run(&mut std::io::stdout()).await)?;
                Ok(())
            }
            Command::Jobs(command) => {
                jobs_cli::ignore_broken_pipe(command.run(&mut std::io::stdout()).await)?;
                Ok(())
            }
            Command::Bench(BenchCommand::Queue(args)) => crate::bench::run(args).await,
            Command::Bench(BenchCommand::Worker(args)) => crate::bench_worker::run(args).await,
            Command::Worker(args) => crate::worker_cli::run(args).await,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Database(#[from] queue::DatabaseError),
    #[error(
        "cannot listen on {addr}: {source}. Is another server using that port? Pick another with --port."
    )]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("the server stopped: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    Queue(#[from] queue::QueueError),
    #[error("cannot create the first admin token: {}", .0.code())]
    Bootstrap(crate::api::ApiError),
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Jobs(#[from] jobs_cli::JobsCliError),
    #[error("the benchmark stopped: {0}")]
    Bench(String),
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
