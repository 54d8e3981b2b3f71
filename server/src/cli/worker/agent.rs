//! How a worker runs jobs, shared by `stepwise worker` and the worker in `stepwise serve`:
//! its flags (`AgentArgs`) and the `WorkerConfig` they become.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use worker::git::MirrorCache;
use worker::logins::Logins;
use worker::process::Limits;
use worker::publish::Identity;
use worker::runner::{KeepWorkspaces, WorkerConfig};
use worker::runtime::{Binaries, Endpoint, Endpoints};
use worker::stages::StageConfig;

use super::sandbox::SandboxArgs;
use crate::cli::error::CliError;

/// How a worker runs jobs: shared by `stepwise worker` and the worker in `stepwise serve`.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Jobs run at once.
    #[arg(long, env = "STEPWISE_WORKER_CONCURRENCY", default_value_t = 1)]
    pub(super) concurrency: usize,
    /// At most N jobs of a runtime at once on this worker, as RUNTIME=N (`codex=1`); repeat
    /// it or give a comma list. A runtime not named is bounded by --concurrency alone.
    #[arg(
        long,
        env = "STEPWISE_MAX_RUNNING_PER_RUNTIME",
        value_name = "RUNTIME=N",
        value_delimiter = ',',
        value_parser = runtime_limit
    )]
    pub(super) max_running_per_runtime: Vec<(String, usize)>,
    /// Where job workspaces and the repository mirrors live [default: `work`, or
    /// `<data-dir>/work` for serve].
    #[arg(long, env = "STEPWISE_WORKDIR")]
    pub(super) workdir: Option<PathBuf>,
    /// Where skills are installed, one folder with a SKILL.md each [default: `skills`, or
    /// `<data-dir>/skills` for serve].
    #[arg(long, env = "STEPWISE_SKILLS_DIR")]
    pub(super) skills_dir: Option<PathBuf>,
    /// What this worker offers (repeat); by default the tools found on PATH.
    #[arg(long = "capability")]
    pub(super) capabilities: Vec<String>,
    #[arg(long, env = "STEPWISE_CODEX_BIN", default_value = "codex")]
    pub(super) codex_bin: PathBuf,
    #[arg(long, env = "STEPWISE_CLAUDE_BIN", default_value = "claude")]
    pub(super) claude_bin: PathBuf,
    #[arg(long, env = "STEPWISE_GEMINI_BIN", default_value = "gemini")]
    pub(super) gemini_bin: PathBuf,
    #[arg(long, env = "STEPWISE_GH_BIN", default_value = "gh")]
    pub(super) gh_bin: PathBuf,
    /// Where codex sends its model requests (OpenAI Responses API), say a proxy, Azure
    /// OpenAI or a local OpenAI-compatible server: `http://host:port/v1`.
    #[arg(long, env = "STEPWISE_CODEX_BASE_URL")]
    pub(super) codex_base_url: Option<String>,
    /// The variable holding codex's API key, passed to codex as CODEX_API_KEY [default:
    /// CODEX_API_KEY, else OPENAI_API_KEY].
    #[arg(long, env = "STEPWISE_CODEX_API_KEY_ENV", value_name = "NAME")]
    pub(super) codex_api_key_env: Option<String>,
    /// Where claude sends its model requests (Anthropic Messages API), say a gateway.
    #[arg(long, env = "STEPWISE_CLAUDE_BASE_URL")]
    pub(super) claude_base_url: Option<String>,
    /// The variable holding claude's API key, passed as ANTHROPIC_API_KEY [default:
    /// ANTHROPIC_API_KEY].
    #[arg(long, env = "STEPWISE_CLAUDE_API_KEY_ENV", value_name = "NAME")]
    pub(super) claude_api_key_env: Option<String>,
    /// Where gemini sends its model requests (Gemini API).
    #[arg(long, env = "STEPWISE_GEMINI_BASE_URL")]
    pub(super) gemini_base_url: Option<String>,
    /// The variable holding gemini's API key, passed as GEMINI_API_KEY [default:
    /// GEMINI_API_KEY].
    #[arg(long, env = "STEPWISE_GEMINI_API_KEY_ENV", value_name = "NAME")]
    pub(super) gemini_api_key_env: Option<String>,
    /// Let jobs use the logins of the user running the worker (`codex login`, claude's
    /// `/login`, gemini's Google login): their credential files are copied into each job's
    /// HOME, and removed when the job ends.
    #[arg(long, env = "STEPWISE_SHARE_LOGINS")]
    pub(super) share_logins: bool,
    /// Where GitHub `owner/name` repositories are cloned from.
    #[arg(
        long,
        env = "STEPWISE_GITHUB_URL",
        default_value = "https://github.com"
    )]
    pub(super) github_url: String,
    /// The lease asked for each job; heartbeats renew it every third.
    #[arg(long, default_value_t = 60)]
    pub(super) lease_seconds: u64,
    /// The longest one step may run.
    #[arg(long, env = "STEPWISE_STEP_TIMEOUT_SECONDS", default_value_t = 3600)]
    pub(super) step_timeout_seconds: u64,
    /// The longest the prepare stage's git may take in all (the repository's clone or
    /// fetch, the checkout).
    #[arg(long, env = "STEPWISE_PREPARE_TIMEOUT_SECONDS", default_value_t = 600)]
    pub(super) prepare_timeout_seconds: u64,
    /// The longest the publish stage's git and gh may take in all (commit, push, pull
    /// request); it also bounds the snapshots and patches taken around each step.
    #[arg(long, env = "STEPWISE_PUBLISH_TIMEOUT_SECONDS", default_value_t = 300)]
    pub(super) publish_timeout_seconds: u64,
    /// How long anything stopped (a step, git, gh) gets between SIGTERM and SIGKILL.
    #[arg(long, env = "STEPWISE_STOP_GRACE_SECONDS", default_value_t = 5)]
    pub(super) grace_seconds: u64,
    /// On SIGTERM, how long running jobs may go on before they are handed back to the
    /// queue for another worker. A second SIGTERM hands them back at once.
    #[arg(long, env = "STEPWISE_DRAIN_SECONDS", default_value_t = 20)]
    pub(super) drain_seconds: u64,
    /// An environment variable whose value is a secret to redact from every log, event and
    /// artifact (repeat). The agent CLIs' API keys, GH_TOKEN, GITHUB_TOKEN and AWS secrets
    /// are always redacted.
    #[arg(long = "secret-env", value_name = "NAME")]
    pub(super) secret_env: Vec<String>,
    /// Which job workspaces to keep when their job ends (everything a run produced is on
    /// the server by then): never, failed (to look into) or always.
    #[arg(long, env = "STEPWISE_KEEP_WORKSPACES", default_value = "failed", value_parser = ["never", "failed", "always"])]
    pub(super) keep_workspaces: String,
    #[command(flatten)]
    pub(super) sandbox: SandboxArgs,
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
    pub(super) fn endpoints(
        &self,
        env: &impl Fn(&str) -> Option<String>,
    ) -> (Endpoints, Vec<String>) {
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

    /// The worker's configuration, ready to claim: its sandbox started once (a worker that
    /// cannot box its steps refuses to run any, saying what to install; `or` names another
    /// way out), and its container engine asked, so that it offers `docker` only when one
    /// answers, and what a previous life left running removed.
    pub(super) async fn ready(
        self,
        home: &Path,
        token: &str,
        or: &str,
    ) -> Result<WorkerConfig, CliError> {
        let container_bin = self.sandbox.container_bin.clone();
        let wants_docker = self.capabilities.iter().any(|c| c == "docker");
        let probed = self.capabilities.is_empty();
        // Made before the box's view of the host is: one hides them only if they are there.
        let (workdir, skills_dir) = self.folders(home)?;
        for dir in [&workdir, &skills_dir] {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::Usage(format!("{}: {e}", dir.display())))?;
        }
        let mut config = self.config(home, token)?;
        let stages = &mut config.stages;
        let scratch = workdir.join(format!("sandbox-check-{}", std::process::id()));
        stages
            .sandbox
            .check(&scratch)
            .await
            .map_err(|e| CliError::Usage(format!("{e}{or}")))?;
        if !(probed || wants_docker) {
            return Ok(config);
        }
        match worker::container::Engine::find(container_bin.as_deref(), &workdir).await {
            Ok(engine) => {
                let swept = engine.sweep().await;
                if swept > 0 {
                    tracing::info!(
                        swept,
                        "removed containers a previous run of this worker left"
                    );
                }
                if probed {
                    stages.capabilities.push("docker".into());
                }
                stages.engine = Some(engine);
            }
            Err(why) if wants_docker => {
                return Err(CliError::Usage(format!(
                    "--capability docker: no container engine answers ({why}); start docker or \
                     install podman, or leave docker out"
                )));
            }
            Err(why) => {
                tracing::info!("no container engine answers, so no container tasks here: {why}")
            }
        }
        Ok(config)
    }

    /// The workdir and the skills' folder, absolute from the start: the CLIs run inside
    /// the checkout, where a relative path would point somewhere else.
    fn folders(&self, home: &Path) -> Result<(PathBuf, PathBuf), CliError> {
        let absolute = |path: PathBuf| {
            std::path::absolute(&path)
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))
        };
        let workdir = absolute(self.workdir.clone().unwrap_or_else(|| home.join("work")))?;
        Ok((workdir, absolute(self.skills_dir(home))?))
    }

    /// The worker's configuration; `home` is where relative defaults go.
    pub(super) fn config(self, home: &Path, token: &str) -> Result<WorkerConfig, CliError> {
        if self.concurrency == 0 || self.lease_seconds < 3 {
            return Err(CliError::Usage(
                "--concurrency must be at least 1 and --lease-seconds at least 3".into(),
            ));
        }
        let (workdir, skills_dir) = self.folders(home)?;
        let env = |name: &str| std::env::var(name).ok();
        let (mut endpoints, key_vars) = self.endpoints(&env);
        // `docker` is added once an engine answers (`ready`).
        let capabilities = if self.capabilities.is_empty() {
            worker::probe_capabilities(std::env::var_os("PATH").as_deref())
        } else {
            self.capabilities
        };
        // Absolute from the start: the CLIs run inside the checkout, where a relative path
        // would point somewhere else.
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
        let binaries = Binaries {
            codex: self.codex_bin,
            claude: self.claude_bin,
            gemini: self.gemini_bin,
        };
        let sandbox = self
            .sandbox
            .build(&binaries, [home, &workdir, &skills_dir])?;
        let stages = StageConfig {
            mirrors: MirrorCache::new(workdir.join("mirrors")),
            workdir: workdir.join("jobs"),
            skills_dir,
            binaries,
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
            sandbox,
            engine: None,
        };
        let mut config = WorkerConfig::new(stages);
        config.concurrency = self.concurrency;
        config.max_running_per_runtime = self.max_running_per_runtime.into_iter().collect();
        config.lease = Duration::from_secs(self.lease_seconds);
        config.drain = Duration::from_secs(self.drain_seconds);
        config.keep_workspaces = match self.keep_workspaces.as_str() {
            "never" => KeepWorkspaces::Never,
            "always" => KeepWorkspaces::Always,
            _ => KeepWorkspaces::Failed,
        };
        config.secrets.push(token.to_string());
        config.secrets.extend(worker::redact::secrets_from_env(
            &[self.secret_env, key_vars, self.sandbox.agent_env].concat(),
            env,
        ));
        Ok(config)
    }
}

/// One `--max-running-per-runtime`: a runtime stepwise runs, `=`, and 1 or more.
fn runtime_limit(text: &str) -> Result<(String, usize), String> {
    let (runtime, n) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not RUNTIME=N (say codex=1)"))?;
    let runtime = runtime.trim().to_lowercase();
    if !contract::RuntimeMode::ALL
        .iter()
        .any(|m| m.as_str() == runtime)
    {
        let known: Vec<&str> = contract::RuntimeMode::ALL
            .iter()
            .map(|m| m.as_str())
            .collect();
        return Err(format!(
            "`{runtime}` is not a runtime: one of {}",
            known.join(", ")
        ));
    }
    match n.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok((runtime, n)),
        _ => Err(format!("`{}` is not a number of jobs, 1 or more", n.trim())),
    }
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
    use super::*;

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

    #[test]
    fn runtime_limits_are_runtime_equals_n_and_a_bad_one_says_why() {
        use clap::FromArgMatches;
        let parse = |flags: &[&str]| {
            let command = AgentArgs::augment_args(clap::Command::new("stepwise"));
            let matches = command.try_get_matches_from([&["stepwise"], flags].concat())?;
            AgentArgs::from_arg_matches(&matches)
        };
        let agent = parse(&["--max-running-per-runtime", "codex=1, Claude=2"]).unwrap();
        let config = agent.config(Path::new("home"), "sww_token").unwrap();
        let limits: Vec<(&str, usize)> = config
            .max_running_per_runtime
            .iter()
            .map(|(r, n)| (r.as_str(), *n))
            .collect();
        assert_eq!(limits, [("claude", 2), ("codex", 1)]);
        for (flag, why) in [
            ("codex", "is not RUNTIME=N"),
            (
                "cursor=1",
                "`cursor` is not a runtime: one of codex, claude, gemini",
            ),
            ("codex=0", "`0` is not a number of jobs, 1 or more"),
            ("codex=many", "`many` is not a number"),
        ] {
            let err = parse(&["--max-running-per-runtime", flag]).unwrap_err();
            assert!(err.to_string().contains(why), "{flag}: {err}");
        }
    }
}
