//! `stepwise worker`: the claim loop on this machine, talking to a server over its API.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tokio_util::sync::CancellationToken;
use worker::client::QueueClient;
use worker::git::MirrorCache;
use worker::process::Limits;
use worker::publish::Identity;
use worker::runner::{self, WorkerConfig};
use worker::runtime::Binaries;
use worker::stages::StageConfig;

use crate::cli::CliError;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The server to take jobs from.
    #[arg(long, env = "STEPWISE_SERVER", default_value = "http://127.0.0.1:3000")]
    server: String,
    /// A worker token (`stepwise token create --kind worker`); its name is this worker's id.
    #[arg(long, env = "STEPWISE_WORKER_TOKEN", hide_env_values = true)]
    token: String,
    /// Jobs run at once.
    #[arg(long, env = "STEPWISE_WORKER_CONCURRENCY", default_value_t = 1)]
    concurrency: usize,
    /// Where job workspaces and the repository mirrors live.
    #[arg(long, env = "STEPWISE_WORKDIR", default_value = "work")]
    workdir: PathBuf,
    /// Where skills are installed, one folder with a SKILL.md each.
    #[arg(long, env = "STEPWISE_SKILLS_DIR", default_value = "skills")]
    skills_dir: PathBuf,
    /// What this worker offers (repeat); by default the tools found on PATH.
    #[arg(long = "capability")]
    capabilities: Vec<String>,
    #[arg(long, env = "STEPWISE_CODEX_BIN", default_value = "codex")]
    codex_bin: PathBuf,
    #[arg(long, env = "STEPWISE_CLAUDE_BIN", default_value = "claude")]
    claude_bin: PathBuf,
    #[arg(long, env = "STEPWISE_GEMINI_BIN", default_value = "gemini")]
    gemini_bin: PathBuf,
    #[arg(long, env = "STEPWISE_GH_BIN", default_value = "gh")]
    gh_bin: PathBuf,
    /// Where GitHub `owner/name` repositories are cloned from.
    #[arg(
        long,
        env = "STEPWISE_GITHUB_URL",
        default_value = "https://github.com"
    )]
    github_url: String,
    /// The lease asked for each job; heartbeats renew it every third.
    #[arg(long, default_value_t = 60)]
    lease_seconds: u64,
    /// The longest one step may run.
    #[arg(long, env = "STEPWISE_STEP_TIMEOUT_SECONDS", default_value_t = 3600)]
    step_timeout_seconds: u64,
    /// How long a stopped step gets between SIGTERM and SIGKILL.
    #[arg(long, env = "STEPWISE_STOP_GRACE_SECONDS", default_value_t = 5)]
    grace_seconds: u64,
}

pub async fn run(args: WorkerArgs) -> Result<(), CliError> {
    if args.concurrency == 0 || args.lease_seconds < 3 {
        return Err(CliError::Usage(
            "--concurrency must be at least 1 and --lease-seconds at least 3".into(),
        ));
    }
    let client = QueueClient::new(&args.server, &args.token)
        .map_err(|e| CliError::Usage(format!("--server / --token: {e}")))?;
    let capabilities = if args.capabilities.is_empty() {
        worker::probe_capabilities(std::env::var_os("PATH").as_deref())
    } else {
        args.capabilities
    };
    let stages = StageConfig {
        mirrors: MirrorCache::new(args.workdir.join("mirrors")),
        workdir: args.workdir.join("jobs"),
        skills_dir: args.skills_dir,
        binaries: Binaries {
            codex: args.codex_bin,
            claude: args.claude_bin,
            gemini: args.gemini_bin,
        },
        limits: Limits {
            timeout: Duration::from_secs(args.step_timeout_seconds),
            grace: Duration::from_secs(args.grace_seconds),
        },
        github: args.github_url,
        identity: Identity::default(),
        gh: args.gh_bin,
        capabilities: capabilities.clone(),
    };
    let mut config = WorkerConfig::new(stages);
    config.concurrency = args.concurrency;
    config.lease = Duration::from_secs(args.lease_seconds);
    config.secrets.push(args.token);
    tracing::info!(server = %args.server, capabilities = ?capabilities, concurrency = config.concurrency, "worker started");
    if capabilities.is_empty() {
        tracing::warn!(
            "this worker offers no capabilities: no agent CLI or git was found on PATH, so no task can be claimed"
        );
    }
    let stop = CancellationToken::new();
    let signal = stop.clone();
    tokio::spawn(async move {
        crate::serve::shutdown_signal().await;
        tracing::info!("stopping: no new jobs; the running ones finish first");
        signal.cancel();
    });
    runner::run(client, config, stop).await;
    Ok(())
}
