//! `stepwise worker`: the claim loop on this machine, talking to a server over its API; and
//! the same loop embedded in `stepwise serve`, which talks to its own API with a worker
//! token it mints at start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use queue::{Queue, TokenKind};
use worker::client::QueueClient;
use worker::git::MirrorCache;
use worker::logins::Logins;
use worker::process::Limits;
use worker::publish::Identity;
use worker::runner::{self, KeepWorkspaces, Shutdown, WorkerConfig};
use worker::runtime::{Binaries, Endpoint, Endpoints};
use worker::stages::StageConfig;

use super::error::CliError;
use super::signal::shutdown_signal;
use crate::http::auth::{Scope, mint};

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
    /// Where codex sends its model requests (OpenAI Responses API), say a proxy, Azure
    /// OpenAI or a local OpenAI-compatible server: `http://host:port/v1`.
    #[arg(long, env = "STEPWISE_CODEX_BASE_URL")]
    codex_base_url: Option<String>,
    /// The variable holding codex's API key, passed to codex as CODEX_API_KEY [default:
    /// CODEX_API_KEY, else OPENAI_API_KEY].
    #[arg(long, env = "STEPWISE_CODEX_API_KEY_ENV", value_name = "NAME")]
    codex_api_key_env: Option<String>,
    /// Where claude sends its model requests (Anthropic Messages API), say a gateway.
    #[arg(long, env = "STEPWISE_CLAUDE_BASE_URL")]
    claude_base_url: Option<String>,
    /// The variable holding claude's API key, passed as ANTHROPIC_API_KEY [default:
    /// ANTHROPIC_API_KEY].
    #[arg(long, env = "STEPWISE_CLAUDE_API_KEY_ENV", value_name = "NAME")]
    claude_api_key_env: Option<String>,
    /// Where gemini sends its model requests (Gemini API).
    #[arg(long, env = "STEPWISE_GEMINI_BASE_URL")]
    gemini_base_url: Option<String>,
    /// The variable holding gemini's API key, passed as GEMINI_API_KEY [default:
    /// GEMINI_API_KEY].
    #[arg(long, env = "STEPWISE_GEMINI_API_KEY_ENV", value_name = "NAME")]
    gemini_api_key_env: Option<String>,
    /// Let jobs use the logins of the user running the worker (`codex login`, claude's
    /// `/login`, gemini's Google login): their credential files are copied into each job's
    /// HOME, and removed when the job ends.
    #[arg(long, env = "STEPWISE_SHARE_LOGINS")]
    share_logins: bool,
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
    /// The longest the prepare stage's git may take in all (the repository's clone or
    /// fetch, the checkout).
    #[arg(long, env = "STEPWISE_PREPARE_TIMEOUT_SECONDS", default_value_t = 600)]
    prepare_timeout_seconds: u64,
    /// The longest the publish stage's git and gh may take in all (commit, push, pull
    /// request); it also bounds the snapshots and patches taken around each step.
    #[arg(long, env = "STEPWISE_PUBLISH_TIMEOUT_SECONDS", default_value_t = 300)]
    publish_timeout_seconds: u64,
    /// How long anything stopped (a step, git, gh) gets between SIGTERM and SIGKILL.
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

    /// Each runtime's endpoint: the flags' base URLs, and the API keys read from the
    /// variables named (or the CLIs' own), as `env` has them.
    fn endpoints(&self, env: &impl Fn(&str) -> Option<String>) -> (Endpoints, Vec<String>) {
        let key = |named: &Option<String>, defaults: &[&str]| -> (Option<String>, Vec<String>) {
            let names: Vec<String> = match named {
                Some(name) => vec![name.clone()],
                None => defaults.iter().map(|d| d.to_string()).collect(),
            };
            let value = names
                .iter()
                .find_map(|n| env(n).filter(|v| !v.trim().is_empty()));
            (value, names)
        };
        let (codex_key, mut names) = key(
            &self.codex_api_key_env,
            &["CODEX_API_KEY", "OPENAI_API_KEY"],
        );
        let (claude_key, more) = key(&self.claude_api_key_env, &["ANTHROPIC_API_KEY"]);
        names.extend(more);
        let (gemini_key, more) = key(&self.gemini_api_key_env, &["GEMINI_API_KEY"]);
        names.extend(more);
        let endpoints = Endpoints {
            codex: Endpoint {
                base_url: self.codex_base_url.clone(),
                api_key: codex_key,
                auth_type: None,
            },
            claude: Endpoint {
                base_url: self.claude_base_url.clone(),
                api_key: claude_key,
                auth_type: None,
            },
            gemini: Endpoint {
                base_url: self.gemini_base_url.clone(),
                api_key: gemini_key,
                auth_type: None,
            },
        };
        (endpoints, names)
    }

    /// The worker's configuration; `home` is where relative defaults go.
    fn config(self, home: &Path, token: &str) -> Result<WorkerConfig, CliError> {
        if self.concurrency == 0 || self.lease_seconds < 3 {
            return Err(CliError::Usage(
                "--concurrency must be at least 1 and --lease-seconds at least 3".into(),
            ));
        }
        let skills_dir = self.skills_dir(home);
        let env = |name: &str| std::env::var(name).ok();
        let (mut endpoints, key_vars) = self.endpoints(&env);
        let capabilities = if self.capabilities.is_empty() {
            worker::probe_capabilities(std::env::var_os("PATH").as_deref())
        } else {
            self.capabilities
        };
        // Absolute from the start: the CLIs run inside the checkout, where a relative path
        // would point somewhere else.
        let absolute = |path: PathBuf| {
            std::path::absolute(&path)
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))
        };
        let skills_dir = absolute(skills_dir)?;
        let workdir = absolute(self.workdir.unwrap_or_else(|| home.join("work")))?;
        let logins = if self.share_logins {
            let user_home = std::env::var_os("HOME").map(PathBuf::from).ok_or_else(|| {
                CliError::Usage("--share-logins: HOME is not set, so no login can be found".into())
            })?;
            let logins = Logins { home: user_home };
            endpoints.gemini.auth_type = logins.gemini_auth_type();
            Some(logins)
        } else {
            None
        };
        let stages = StageConfig {
            mirrors: MirrorCache::new(workdir.join("mirrors")),
            workdir: workdir.join("jobs"),
            skills_dir,
            binaries: Binaries {
                codex: self.codex_bin,
                claude: self.claude_bin,
                gemini: self.gemini_bin,
            },
            endpoints,
            logins,
            limits: Limits {
                timeout: Duration::from_secs(self.step_timeout_seconds),
                grace: Duration::from_secs(self.grace_seconds),
            },
            prepare_timeout: Duration::from_secs(self.prepare_timeout_seconds),
            publish_timeout: Duration::from_secs(self.publish_timeout_seconds),
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
        config.secrets.extend(worker::redact::secrets_from_env(
            &[self.secret_env, key_vars].concat(),
            env,
        ));
        Ok(config)
    }
}

pub async fn run(args: WorkerArgs) -> Result<(), CliError> {
    let servers: Vec<&str> = args.server.iter().map(String::as_str).collect();
    let client = QueueClient::with_servers(&servers, &args.token)
        .map_err(|e| CliError::Usage(format!("--server / --token: {e}")))?;
    let config = args.agent.config(Path::new("."), &args.token)?;
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
    let config = agent.config(home, &minted.secret)?;
    announce(base_url, &config);
    Ok(tokio::spawn(runner::run(client, config, shutdown)))
}

#[cfg(any(test, feature = "testing"))]
impl AgentArgs {
    /// The defaults, as if no flag were given.
    pub fn defaults() -> AgentArgs {
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
    use crate::testing::server::start;

    #[test]
    fn api_keys_come_from_the_named_variable_else_the_cli_s_own_and_are_redacted() {
        let env = |name: &str| {
            match name {
                "OPENAI_API_KEY" => Some("openai-key-value"),
                "TEAM_KEY" => Some("team-key-value"),
                "ANTHROPIC_API_KEY" => Some("anthropic-key-value"),
                _ => None,
            }
            .map(String::from)
        };
        let mut agent = AgentArgs::defaults();
        agent.gemini_api_key_env = Some("TEAM_KEY".into());
        agent.claude_base_url = Some("http://gateway:4000".into());
        let (endpoints, names) = agent.endpoints(&env);
        // codex exec reads only CODEX_API_KEY; an OPENAI_API_KEY is passed on as that.
        assert_eq!(endpoints.codex.api_key.as_deref(), Some("openai-key-value"));
        assert_eq!(
            endpoints.claude.api_key.as_deref(),
            Some("anthropic-key-value")
        );
        assert_eq!(
            endpoints.claude.base_url.as_deref(),
            Some("http://gateway:4000")
        );
        assert_eq!(endpoints.gemini.api_key.as_deref(), Some("team-key-value"));
        assert!(names.contains(&"TEAM_KEY".to_string()), "{names:?}");
        let config = agent
            .config(Path::new("relative/home"), "sww_token")
            .unwrap();
        assert!(config.stages.workdir.is_absolute());
        assert!(config.stages.skills_dir.is_absolute());
    }

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
