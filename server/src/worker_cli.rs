//! `stepwise worker`: the claim loop on this machine, talking to a server over its API; and
//! the same loop embedded in `stepwise serve`, which talks to its own API with a worker
//! token it mints at start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use queue::{Queue, TokenKind};
use worker::client::QueueClient;
use worker::git::MirrorCache;
use worker::process::Limits;
use worker::publish::Identity;
use worker::runner::{self, KeepWorkspaces, Shutdown, WorkerConfig};
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
    #[command(flatten)]
    agent: AgentArgs,
}

/// How a worker runs jobs: shared by `stepwise worker` and the worker in `stepwise serve`.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Jobs run at once.
    #[arg(long, env = "STEPWISE_WORKER_CONCURRENCY", default_value_t = 1)]
    concurrency: usize,
    /// Where job workspaces and the repository mirrors live [default: `work`, or
    /// `<data-dir>/work` for serve].
    #[arg(long, env = "STEPWISE_WORKDIR")]
    workdir: Option<PathBuf>,
    /// Where skills are installed, one folder with a SKILL.md each [default: `skills`, or
    /// `<data-dir>/skills` for serve].
    #[arg(long, env = "STEPWISE_SKILLS_DIR")]
    skills_dir: Option<PathBuf>,
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
    /// On SIGTERM, how long running jobs may go on before they are handed back to the
    /// queue for another worker. A second SIGTERM hands them back at once.
    #[arg(long, env = "STEPWISE_DRAIN_SECONDS", default_value_t = 20)]
    drain_seconds: u64,
    /// An environment variable whose value is a secret to redact from every log, event and
    /// artifact (repeat). The agent CLIs' API keys, GH_TOKEN, GITHUB_TOKEN and AWS secrets
    /// are always redacted.
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
    /// Which job workspaces to keep when their job ends (everything a run produced is on
    /// the server by then): never, failed (to look into) or always.
    #[arg(long, env = "STEPWISE_KEEP_WORKSPACES", default_value = "failed", value_parser = ["never", "failed", "always"])]
    keep_workspaces: String,
}

impl AgentArgs {
    /// Where skills are installed; `home` is where the relative default goes.
    pub fn skills_dir(&self, home: &Path) -> PathBuf {
        self.skills_dir
            .clone()
            .unwrap_or_else(|| home.join("skills"))
    }

    /// The worker's configuration; `home` is where relative defaults go.
    fn config(self, home: &Path, token: &str) -> Result<WorkerConfig, CliError> {
        if self.concurrency == 0 || self.lease_seconds < 3 {
            return Err(CliError::Usage(
                "--concurrency must be at least 1 and --lease-seconds at least 3".into(),
            ));
        }
        let skills_dir = self.skills_dir(home);
        let capabilities = if self.capabilities.is_empty() {
            worker::probe_capabilities(std::env::var_os("PATH").as_deref())
        } else {
            self.capabilities
        };
        let workdir = self.workdir.unwrap_or_else(|| home.join("work"));
        let stages = StageConfig {
            mirrors: MirrorCache::new(workdir.join("mirrors")),
            workdir: workdir.join("jobs"),
            skills_dir,
            binaries: Binaries {
                codex: self.codex_bin,
                claude: self.claude_bin,
                gemini: self.gemini_bin,
            },
            limits: Limits {
                timeout: Duration::from_secs(self.step_timeout_seconds),
                grace: Duration::from_secs(self.grace_seconds),
            },
            github: self.github_url,
            identity: Identity::default(),
            gh: self.gh_bin,
            capabilities,
        };
        let mut config = WorkerConfig::new(stages);
        config.concurrency = self.concurrency;
        config.lease = Duration::from_secs(self.lease_seconds);
        config.drain = Duration::from_secs(self.drain_seconds);
        config.keep_workspaces = match self.keep_workspaces.as_str() {
            "never" => KeepWorkspaces::Never,
            "always" => KeepWorkspaces::Always,
            _ => KeepWorkspaces::Failed,
        };
        config.secrets.push(token.to_string());
        config
            .secrets
            .extend(worker::redact::secrets_from_env(&self.secret_env, |name| {
                std::env::var(name).ok()
            }));
        Ok(config)
    }
}

pub async fn run(args: WorkerArgs) -> Result<(), CliError> {
    let client = QueueClient::new(&args.server, &args.token)
        .map_err(|e| CliError::Usage(format!("--server / --token: {e}")))?;
    let config = args.agent.config(Path::new("."), &args.token)?;
    announce(&args.server, &config);
    let shutdown = Shutdown::default();
    tokio::spawn(signals(shutdown.clone()));
    runner::run(client, config, shutdown).await;
    Ok(())
}

fn announce(server: &str, config: &WorkerConfig) {
    let capabilities = &config.stages.capabilities;
    tracing::info!(%server, ?capabilities, concurrency = config.concurrency, "worker started");
    if capabilities.is_empty() {
        tracing::warn!(
            "this worker offers no capabilities: no agent CLI or git was found on PATH, so no task can be claimed"
        );
    }
}

/// The first SIGTERM or Ctrl-C stops claiming and lets running jobs drain; a second one
/// hands them back at once.
async fn signals(shutdown: Shutdown) {
    crate::serve::shutdown_signal().await;
    tracing::info!("stopping: no new jobs; running ones may finish, then are handed back");
    shutdown.stop.cancel();
    crate::serve::shutdown_signal().await;
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
) -> Result<tokio::task::JoinHandle<()>, CliError> {
    let name = embedded_name(port);
    for old in queue.list_tokens().await? {
        if old.name == name && old.kind == TokenKind::Worker && old.revoked_at.is_none() {
            queue.revoke_token(&old.id).await?;
        }
    }
    let minted = crate::auth::mint(&name, TokenKind::Worker, crate::auth::Scope::any_worker())
        .map_err(|e| {
            CliError::Usage(format!(
                "cannot mint the embedded worker's token: {}",
                e.code()
            ))
        })?;
    queue.create_token(minted.record).await?;
    let client = QueueClient::new(base_url, &minted.secret)
        .map_err(|e| CliError::Usage(format!("the embedded worker's server URL: {e}")))?;
    let config = agent.config(home, &minted.secret)?;
    announce(base_url, &config);
    Ok(tokio::spawn(runner::run(client, config, shutdown)))
}

#[cfg(test)]
impl AgentArgs {
    /// The defaults, as if no flag were given.
    pub(crate) fn defaults() -> AgentArgs {
        use clap::FromArgMatches;
        let command = AgentArgs::augment_args(clap::Command::new("stepwise"));
        AgentArgs::from_arg_matches(&command.get_matches_from(["stepwise"]))
            .expect("the defaults parse")
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use contract::JobState;
    use queue::Role;
    use serde_json::json;

    use super::*;
    use crate::jobs_cli::test_server::start;

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
        let workspace = tmp.path().join("work/jobs").join(&job.id);
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
