//! The sandbox's flags, shared by `stepwise worker` and the worker in `stepwise serve`,
//! and the `Sandbox` they become.

use std::path::{Path, PathBuf};

use clap::Args;
use worker::runtime::Binaries;
use worker::sandbox::{AgentNetwork, HostView, Sandbox, SandboxMode};

use crate::cli::error::CliError;

/// The box every agent step and completion check runs in.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Sandbox")]
pub struct SandboxArgs {
    /// bwrap: each step in a bubblewrap box (its checkout and job HOME writable, the system
    /// read-only, nothing else in sight, no other process); off: steps run as this user and
    /// can read and write whatever it can.
    #[arg(long = "sandbox", env = "STEPWISE_SANDBOX", default_value = "bwrap", value_parser = parse_name::<SandboxMode>)]
    pub mode: SandboxMode,
    /// A step's network: on (the host's; agents must reach their model API) or none (a
    /// loopback of its own, for local models reached otherwise; needs --sandbox bwrap).
    #[arg(long, env = "STEPWISE_AGENT_NETWORK", default_value = "on", value_parser = parse_name::<AgentNetwork>)]
    pub agent_network: AgentNetwork,
    /// A variable of this worker's environment to pass to steps (repeat, or a comma list),
    /// besides PATH, the locale, TZ, TERM, proxies and the runtime's key; its value is
    /// redacted like --secret-env. GH_TOKEN, GITHUB_TOKEN, DATABASE_URL and STEPWISE_* are
    /// refused.
    #[arg(
        long = "agent-env",
        env = "STEPWISE_AGENT_ENV",
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub agent_env: Vec<String>,
    /// A folder steps may read besides the system and the agent CLIs (repeat, or a comma
    /// list): a toolchain (`~/.cargo`, `/opt/node`) or a cache.
    #[arg(
        long = "sandbox-ro",
        env = "STEPWISE_SANDBOX_RO",
        value_name = "PATH",
        value_delimiter = ','
    )]
    pub read_only: Vec<PathBuf>,
    /// A path steps must not see even inside a folder they may read (repeat, or a comma
    /// list), besides /etc's known secrets, the data dir, the workdir and this user's HOME.
    #[arg(
        long = "sandbox-hide",
        env = "STEPWISE_SANDBOX_HIDE",
        value_name = "PATH",
        value_delimiter = ','
    )]
    pub hide: Vec<PathBuf>,
    /// The bubblewrap program.
    #[arg(long, env = "STEPWISE_BWRAP_BIN", default_value = "bwrap")]
    pub bwrap_bin: PathBuf,
    /// The container engine's program for container tasks [default: docker, else podman:
    /// the first whose `info` answers]. The worker offers `docker` only when one answers.
    #[arg(long, env = "STEPWISE_CONTAINER_BIN")]
    pub container_bin: Option<PathBuf>,
}

/// A closed set of names (`bwrap`, `off`), told apart by the contract's one parser.
fn parse_name<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr<Err = contract::modes::ParseModeError>,
{
    text.parse()
        .map_err(|e: contract::modes::ParseModeError| e.to_string())
}

impl SandboxArgs {
    /// The sandbox these flags ask for, around `binaries`; `hidden` (the data dir, the
    /// workdir, the skills) never shows in a box, nor does this user's HOME.
    pub(super) fn build<'a>(
        &self,
        binaries: &Binaries,
        hidden: impl IntoIterator<Item = &'a Path>,
    ) -> Result<Sandbox, CliError> {
        let mut hidden: Vec<PathBuf> = hidden.into_iter().map(Path::to_path_buf).collect();
        hidden.extend(std::env::var_os("HOME").map(PathBuf::from));
        hidden.extend(self.hide.iter().cloned());
        let programs =
            [&binaries.codex, &binaries.claude, &binaries.gemini].map(|p| p.to_path_buf());
        let view = match self.mode {
            SandboxMode::Bwrap => HostView::new(
                &programs,
                std::env::var_os("PATH").as_deref(),
                &self.read_only,
                &hidden,
            ),
            SandboxMode::Off => HostView::default(),
        };
        Sandbox::new(
            self.mode,
            self.agent_network,
            self.bwrap_bin.clone(),
            view,
            self.agent_env.clone(),
        )
        .map_err(|e| CliError::Usage(e.to_string()))
    }
}
