//! The box every agent step and completion check runs in. An agent is untrusted code: it
//! does what a task, or any file it reads, tells it. So, with bubblewrap (`bwrap`):
//!
//! - its environment is built from an allowlist ([`env`]), never inherited: no publish
//!   credential, no database, no worker setting;
//! - it sees the system read-only and the agent CLIs' install folders ([`mounts`]), its
//!   checkout and its job's HOME read-write, the checkout's `.git` read-only (the publish
//!   stage's git runs on it outside the box, so the agent must not plant hooks or config
//!   there), a `/tmp` of its own, and nothing else: not the data dir, not other jobs, not
//!   the worker's HOME;
//! - it runs in pid, IPC and user namespaces of its own with every capability dropped and
//!   no further user namespaces, so it cannot see or signal the worker, undo a mount or
//!   nest a box of its own, and everything it starts ends with it (`--die-with-parent`);
//! - its network is the host's (the agent must reach its model API), or none.
//!
//! `off` runs steps on the host as the worker's user, with the same environment allowlist.

mod env;
mod mounts;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use env::refused as refused_env;
pub use mounts::{HostView, Mount};

use crate::process::{self, Budget, RunError};
use crate::runtime::Invocation;
use crate::workspace::Workspace;

/// How steps are isolated from the worker's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// bubblewrap: namespaces and a file system of the job's own.
    Bwrap,
    /// None: steps run as the worker's user, seeing what it sees.
    Off,
}
contract::wire_names!(SandboxMode, "sandbox", lenient { Bwrap = "bwrap", Off = "off" });

/// What network a step has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentNetwork {
    /// The host's: the agent reaches its model API, and anything else.
    On,
    /// None but a loopback of its own.
    None,
}
contract::wire_names!(AgentNetwork, "agent network", lenient { On = "on", None = "none" });

/// How the worker boxes its steps, decided at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub mode: SandboxMode,
    pub network: AgentNetwork,
    /// The bubblewrap program.
    pub bwrap: PathBuf,
    /// What the box shows of the host.
    pub view: HostView,
    /// The worker's variables the operator passes to steps (`--agent-env`).
    pub pass_env: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SandboxError {
    #[error("--agent-env {name}: {why}")]
    RefusedEnv { name: String, why: &'static str },
    #[error(
        "--agent-network none needs the sandbox: with --sandbox off a step has the worker's network"
    )]
    NetworkWithoutSandbox,
    #[error("{0}")]
    CannotStart(String),
}

impl Sandbox {
    /// No box: steps run on the host, with the environment allowlist only.
    pub fn off() -> Sandbox {
        Sandbox {
            mode: SandboxMode::Off,
            network: AgentNetwork::On,
            bwrap: "bwrap".into(),
            view: HostView::default(),
            pass_env: Vec::new(),
        }
    }

    /// A sandbox of `mode`; refuses a variable that must never reach a step, and a network
    /// setting the mode cannot keep.
    pub fn new(
        mode: SandboxMode,
        network: AgentNetwork,
        bwrap: PathBuf,
        view: HostView,
        pass_env: Vec<String>,
    ) -> Result<Sandbox, SandboxError> {
        for name in &pass_env {
            if let Some(why) = env::refused(name) {
                return Err(SandboxError::RefusedEnv {
                    name: name.clone(),
                    why,
                });
            }
        }
        if mode == SandboxMode::Off && network == AgentNetwork::None {
            return Err(SandboxError::NetworkWithoutSandbox);
        }
        Ok(Sandbox {
            mode,
            network,
            bwrap,
            view,
            pass_env,
        })
    }

    pub fn is_on(&self) -> bool {
        self.mode == SandboxMode::Bwrap
    }

    /// How the workers page shows it: `bwrap`, `bwrap, no network` or `off`.
    pub fn describe(&self) -> String {
        match (self.mode, self.network) {
            (SandboxMode::Bwrap, AgentNetwork::None) => "bwrap, no network".into(),
            (mode, _) => mode.to_string(),
        }
    }

    /// `invocation` as it runs in job `ws`'s box: the environment from the allowlist and,
    /// with bubblewrap, the box around it.
    pub fn wrap(&self, invocation: Invocation, ws: &Workspace) -> Invocation {
        let mut set = invocation.env.clone();
        // The job's own temporary folder, which goes with its workspace. Without the box
        // it also keeps codex's HOME out of the temporary folder: codex refuses to make
        // its sandbox's helper there, and its commands then fail where bubblewrap is
        // installed.
        let tmp = match self.mode {
            SandboxMode::Bwrap => "/tmp".into(),
            SandboxMode::Off => ws.tmp().display().to_string(),
        };
        set.push(("TMPDIR".into(), tmp));
        let worker_env = std::env::vars().filter(|(name, _)| {
            // An adapter's removal (a CODEX_HOME of the worker's) stands, even when named.
            !invocation.env_remove.contains(name)
        });
        let mut env = env::build(worker_env, &self.pass_env, &set);
        if self.is_on() {
            // The box has the folders the CLIs were found in, resolved: a PATH entry that
            // reaches one through a link or `..` would lead nowhere inside it.
            for (name, value) in &mut env {
                if name == "PATH" {
                    *value = resolved_path(value);
                }
            }
        }
        let mut boxed = Invocation {
            env,
            clear_env: true,
            env_remove: Vec::new(),
            ..invocation
        };
        if self.is_on() {
            let mut args = self.bwrap_args(ws, &boxed.cwd);
            args.push("--".into());
            args.push(boxed.program.to_string_lossy().into_owned());
            args.append(&mut boxed.args);
            boxed.args = args;
            boxed.program = self.bwrap.clone();
            // bubblewrap dying takes the whole box at once: a stop's SIGTERM goes to the
            // step's processes, which get the grace to finish, and bwrap leaves after them.
            boxed.supervised = true;
        }
        boxed
    }

    /// bubblewrap's options for a box around job `ws`, working in `cwd`.
    fn bwrap_args(&self, ws: &Workspace, cwd: &Path) -> Vec<String> {
        let mut args: Vec<String> = [
            "--unshare-user",
            "--disable-userns",
            "--cap-drop",
            "ALL",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
        ]
        .map(String::from)
        .to_vec();
        if self.network == AgentNetwork::None {
            args.push("--unshare-net".into());
        }
        let path = |p: &Path| p.to_string_lossy().into_owned();
        args.extend(["--proc", "/proc", "--dev", "/dev"].map(String::from));
        // The job's own /tmp first, so that a folder shown inside the host's /tmp (an
        // operator's --sandbox-ro, a CLI installed there) is mounted on top of it.
        let tmp = ws.tmp();
        for at in ["/tmp", "/var/tmp"] {
            args.extend(["--bind".into(), path(&tmp), at.into()]);
        }
        for mount in &self.view.mounts {
            match mount {
                Mount::ReadOnly(p) => flag_pair(&mut args, "--ro-bind", p, p),
                Mount::Link { path, target } => flag_pair(&mut args, "--symlink", target, path),
                Mount::Mask { path, dir: false } => {
                    flag_pair(&mut args, "--ro-bind", Path::new("/dev/null"), path)
                }
                Mount::Mask { .. } => {}
            }
        }
        // Emptied folders: read-only only after the job's own mounts, which may lie inside
        // one (a workdir in a folder the operator shows) and need their mount points made.
        let masked: Vec<&Path> = self
            .view
            .mounts
            .iter()
            .filter_map(|m| match m {
                Mount::Mask { path, dir: true } => Some(path.as_path()),
                _ => None,
            })
            .collect();
        for p in &masked {
            args.extend(["--tmpfs".into(), path(p)]);
        }
        for rw in [&ws.home, &ws.skills_active, &ws.repo] {
            flag_pair(&mut args, "--bind", rw, rw);
        }
        // bwrap takes the source as it finds it: were .git a link the agent planted, the
        // mount would show what it points to, so only a real folder is mounted.
        let git = ws.repo.join(".git");
        if std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
            flag_pair(&mut args, "--ro-bind", &git, &git);
        }
        // The box's own root and the emptied folders hold only the folders on the way to
        // the mounts: read-only, so that nothing is written where it would vanish.
        for p in &masked {
            args.extend(["--remount-ro".into(), path(p)]);
        }
        args.extend(["--remount-ro".into(), "/".into()]);
        args.extend(["--chdir".into(), path(cwd)]);
        args
    }

    /// Starts a box once, as a step's would be, around `true`: at start, so that a worker
    /// that cannot box its steps says why before it claims anything. `scratch` is a folder
    /// of the worker's own, used as a job's workspace.
    pub async fn check(&self, scratch: &Path) -> Result<(), SandboxError> {
        if !self.is_on() {
            return Ok(());
        }
        if !cfg!(target_os = "linux") {
            return Err(SandboxError::CannotStart(
                "the bwrap sandbox needs Linux; on this system pass --sandbox off (steps then run \
                 as the worker's user and can read what it can)"
                    .into(),
            ));
        }
        let ws = Workspace::at(scratch.to_path_buf());
        let made = [&ws.repo, &ws.home, &ws.skills_active, &ws.tmp()]
            .iter()
            .try_for_each(std::fs::create_dir_all);
        if let Err(e) = made {
            return Err(SandboxError::CannotStart(format!(
                "could not make {}: {e}",
                scratch.display()
            )));
        }
        let invocation = self.wrap(
            Invocation::plain("true".into(), Vec::new(), ws.repo.clone()),
            &ws,
        );
        let mut command = tokio::process::Command::new(&invocation.program);
        command
            .args(&invocation.args)
            .env_clear()
            .envs(invocation.env.iter().map(|(k, v)| (k, v)));
        let budget = Budget::new(
            "the sandbox check",
            Duration::from_secs(30),
            Duration::from_secs(1),
            Default::default(),
        );
        let result = process::output(&mut command, &budget).await;
        let _ = std::fs::remove_dir_all(scratch);
        match result {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(SandboxError::CannotStart(cannot_start(
                &self.bwrap,
                &out.stderr_text(),
            ))),
            Err(RunError::Spawn { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(SandboxError::CannotStart(format!(
                    "the sandbox cannot start: {} was not found. {INSTALL}",
                    self.bwrap.display()
                )))
            }
            Err(e) => Err(SandboxError::CannotStart(format!(
                "the sandbox cannot start: {e}. {INSTALL}"
            ))),
        }
    }
}

/// `PATH` with each folder resolved (links, `..`) where it exists.
fn resolved_path(path: &str) -> String {
    let dirs = std::env::split_paths(path).map(|dir| dir.canonicalize().unwrap_or(dir));
    std::env::join_paths(dirs)
        .map(|joined| joined.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string())
}

const INSTALL: &str = "Install bubblewrap 0.8 or later (Debian and Ubuntu: `apt-get install \
    bubblewrap`; Fedora: `dnf install bubblewrap`; Arch: `pacman -S bubblewrap`), or pass \
    --sandbox off to run steps without a sandbox (they then read and write whatever the \
    worker's user can)";

/// What to do when bubblewrap is there but refuses to start a box.
fn cannot_start(bwrap: &Path, stderr: &str) -> String {
    let hint = if stderr.contains("disable-userns") || stderr.contains("Unknown option") {
        "this bubblewrap is older than 0.8, which --disable-userns needs: install a newer one"
    } else if stderr.contains("uid map")
        || stderr.contains("No permissions")
        || stderr.contains("Operation not permitted")
    {
        "this system does not let this user make user namespaces: allow them (Ubuntu 24.04 and \
         later restrict them with AppArmor: `sysctl kernel.apparmor_restrict_unprivileged_userns=0`, \
         or an AppArmor profile for bwrap; elsewhere `sysctl user.max_user_namespaces` must be \
         above 0), or run the worker as root"
    } else {
        "see bubblewrap's message above"
    };
    format!(
        "the sandbox cannot start: {} failed: {}. {hint}; or pass --sandbox off to run steps \
         without a sandbox",
        bwrap.display(),
        if stderr.is_empty() {
            "(no message)"
        } else {
            stderr
        }
    )
}

/// `flag a b`, as bwrap takes a mount: `--bind from to`, `--symlink target path`.
fn flag_pair(args: &mut Vec<String>, flag: &str, a: &Path, b: &Path) {
    let text = |p: &Path| p.to_string_lossy().into_owned();
    args.extend([flag.to_string(), text(a), text(b)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(network: AgentNetwork) -> Sandbox {
        Sandbox::new(
            SandboxMode::Bwrap,
            network,
            "bwrap".into(),
            HostView::default(),
            Vec::new(),
        )
        .unwrap()
    }

    #[test]
    fn a_boxed_step_runs_bwrap_around_the_cli_with_only_its_job_in_sight() {
        let ws = Workspace::at("/w/jobs/j1".into());
        let inv = Invocation::plain(
            "codex".into(),
            vec!["exec".into(), "-".into()],
            ws.repo.clone(),
        );
        let boxed = sandbox(AgentNetwork::On).wrap(inv, &ws);
        assert_eq!(boxed.program, PathBuf::from("bwrap"));
        let args = boxed.args.join(" ");
        for part in [
            "--unshare-pid",
            "--die-with-parent",
            "--cap-drop ALL",
            "--disable-userns",
            "--bind /w/jobs/j1/repo /w/jobs/j1/repo",
            "--bind /w/jobs/j1/home /w/jobs/j1/home",
            "--bind /w/jobs/j1/tmp /tmp",
            "--chdir /w/jobs/j1/repo -- codex exec -",
        ] {
            assert!(args.contains(part), "{part} not in {args}");
        }
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(boxed.clear_env);
        assert_eq!(boxed.env_value("TMPDIR"), Some("/tmp"));
        let offline = sandbox(AgentNetwork::None).wrap(
            Invocation::plain("true".into(), Vec::new(), ws.repo.clone()),
            &ws,
        );
        assert!(offline.args.contains(&"--unshare-net".to_string()));
    }

    #[test]
    fn a_path_through_links_or_dot_dot_is_resolved_for_the_box() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(real.join("a/bin")).unwrap();
        let given = format!("{}/a/../a/bin:/no/such/dir", real.display());
        assert_eq!(
            resolved_path(&given),
            format!("{}/a/bin:/no/such/dir", real.display())
        );
    }

    #[test]
    fn no_network_without_the_box_and_no_publish_credential_ever() {
        assert_eq!(
            Sandbox::new(
                SandboxMode::Off,
                AgentNetwork::None,
                "bwrap".into(),
                HostView::default(),
                Vec::new()
            ),
            Err(SandboxError::NetworkWithoutSandbox)
        );
        let refused = Sandbox::new(
            SandboxMode::Bwrap,
            AgentNetwork::On,
            "bwrap".into(),
            HostView::default(),
            vec!["GH_TOKEN".into()],
        )
        .unwrap_err();
        assert!(
            refused.to_string().contains("publish credential"),
            "{refused}"
        );
    }

    #[test]
    fn off_keeps_the_host_but_still_builds_the_environment_from_the_allowlist() {
        let ws = Workspace::at("/w/jobs/j1".into());
        let mut inv = Invocation::plain("claude".into(), Vec::new(), ws.repo.clone());
        inv.env.push(("HOME".into(), "/w/jobs/j1/home".into()));
        let plain = Sandbox::off().wrap(inv, &ws);
        assert_eq!(plain.program, PathBuf::from("claude"));
        assert!(plain.clear_env);
        assert_eq!(plain.env_value("HOME"), Some("/w/jobs/j1/home"));
        assert_eq!(plain.env_value("TMPDIR"), Some("/w/jobs/j1/tmp"));
        assert!(
            plain
                .env
                .iter()
                .all(|(k, _)| env::passes(k) || k == "HOME" || k == "TMPDIR")
        );
    }
}
