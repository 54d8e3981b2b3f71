//! `stepwise serve`'s flags, and the configuration they become, checked before anything
//! starts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use app::{RuntimeStatus, ServerSettings};
use clap::Args;
use contract::RuntimeMode;

use super::db::{DbArgs, QueueSettings};
use super::defaults::DefaultsArgs;
use super::error::ConfigError;
use super::github::GitHubArgs;
use super::notify::NotifyArgs;
use super::retention::RetentionArgs;
use super::worker::AgentArgs;
use crate::http::site::SiteConfig;

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
    pub worker: AgentArgs,
    /// What a task leaves out.
    #[command(flatten, next_help_heading = "Task defaults")]
    pub defaults: DefaultsArgs,
    /// At most this many jobs of one repository run at once, on all workers together; the
    /// others wait while other repositories' jobs go first. 0: no limit (each job works on
    /// a branch of its own, so several may run on one repository at once).
    #[arg(
        long,
        env = "STEPWISE_MAX_RUNNING_PER_REPOSITORY",
        default_value_t = 0,
        value_name = "N",
        help_heading = "Limits"
    )]
    pub max_running_per_repository: u32,
    /// Where jobs' ends are posted, signed.
    #[command(flatten, next_help_heading = "Notifications")]
    pub notify: NotifyArgs,
    /// How long finished jobs keep their log lines, events, artifacts and rows.
    #[command(flatten, next_help_heading = "Retention")]
    pub retention: RetentionArgs,
    /// GitHub: pull request feedback and its webhook deliveries.
    #[command(flatten, next_help_heading = "GitHub")]
    pub github: GitHubArgs,
}

/// Everything `stepwise serve` needs, checked before anything starts.
#[derive(Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub db: DbArgs,
    pub site_root: PathBuf,
    pub settings: ServerSettings,
    /// The skills the task form offers: the embedded worker's (`--skills-dir`, else
    /// `<data-dir>/skills`), also with --no-worker.
    pub skills_dir: PathBuf,
    /// The embedded worker's settings; `None` with --no-worker.
    pub worker: Option<AgentArgs>,
    /// The queue's limit of running jobs per repository; `None`: no limit.
    pub max_running_per_repository: Option<u32>,
    /// Where jobs' ends are posted.
    pub webhooks: crate::webhooks::WebhookConfig,
    /// What finished jobs keep, and for how long.
    pub retention: queue::RetentionConfig,
    /// Pull request feedback's GitHub API and pace.
    pub feedback: crate::feedback::FeedbackConfig,
    /// What GitHub signs its webhook deliveries with; none: they are not taken.
    pub github_webhook_secret: Option<super::github::HookSecret>,
    /// The rules that make jobs of GitHub's deliveries (read once already, so they read).
    pub github_rules: Option<std::path::PathBuf>,
}

impl Config {
    pub fn load(
        args: ServeArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let addr_text = format!("{}:{}", args.host, args.port);
        let addr = addr_text
            .parse()
            .or_else(|_| format!("[{}]:{}", args.host, args.port).parse())
            .map_err(|e: std::net::AddrParseError| ConfigError::Addr {
                addr: addr_text.clone(),
                reason: e.to_string(),
            })?;
        let defaults = args.defaults.resolve()?;
        let webhooks = args.notify.resolve()?;
        let (feedback, github_webhook_secret) = args.github.resolve()?;
        let site_root = match args.site_root {
            Some(root) => root,
            None => default_site_root(),
        };
        if !site_root.join("pkg").is_dir() {
            return Err(ConfigError::SiteMissing(site_root));
        }
        let installed =
            worker::probe_capabilities(env("PATH").as_deref().map(std::ffi::OsStr::new));
        let runtimes = RuntimeMode::ALL
            .iter()
            .map(|&mode| RuntimeStatus {
                mode,
                installed: installed.iter().any(|c| c == mode.as_str()),
            })
            .collect();
        Ok(Config {
            addr,
            skills_dir: args.worker.skills_dir(&args.db.data_dir),
            db: args.db,
            site_root,
            settings: ServerSettings {
                defaults,
                runtimes,
                skills: Vec::new(),
            },
            worker: (!args.no_worker).then_some(args.worker),
            max_running_per_repository: (args.max_running_per_repository > 0)
                .then_some(args.max_running_per_repository),
            webhooks,
            retention: args.retention.config(),
            feedback,
            github_webhook_secret,
            github_rules: args.github.github_rules.clone(),
        })
    }
}

impl Config {
    /// What the queue needs of this, reporting to `observers` (the metrics, the webhooks).
    pub fn queue_settings(
        &self,
        observers: Vec<std::sync::Arc<dyn queue::Observer>>,
    ) -> QueueSettings {
        QueueSettings {
            defaults: self.settings.defaults.clone(),
            max_running_per_repository: self.max_running_per_repository,
            observers,
        }
    }

    /// What the site's router needs of this.
    pub fn site(&self) -> SiteConfig {
        SiteConfig {
            addr: self.addr,
            site_root: self.site_root.clone(),
            settings: self.settings.clone(),
            skills_dir: self.skills_dir.clone(),
        }
    }
}

/// cargo-leptos writes the site to `<workspace>/target/site` and the binary to
/// `<target>/<profile>/stepwise`; look beside the binary first, then in the working directory.
fn default_site_root() -> PathBuf {
    let beside_binary = std::env::current_exe().ok().and_then(|exe| {
        exe.parent()
            .and_then(Path::parent)
            .map(|target| target.join("site"))
    });
    match beside_binary {
        Some(dir) if dir.join("pkg").is_dir() => dir,
        _ => PathBuf::from("target/site"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(site_root: &Path) -> ServeArgs {
        args_with(site_root, &[])
    }

    fn args_with(site_root: &Path, defaults: &[&str]) -> ServeArgs {
        ServeArgs {
            host: "127.0.0.1".into(),
            port: 0,
            db: DbArgs {
                data_dir: "data".into(),
                database_url: None,
            },
            site_root: Some(site_root.to_path_buf()),
            no_worker: true,
            worker: AgentArgs::defaults(),
            defaults: DefaultsArgs::from_flags(defaults).unwrap(),
            max_running_per_repository: 1,
            notify: NotifyArgs::default(),
            retention: RetentionArgs::default(),
            github: Default::default(),
        }
    }

    fn site() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        dir
    }

    #[test]
    fn disagreeing_publish_mode_and_alias_stop_the_start_naming_both() {
        let site = site();
        let args = args_with(
            site.path(),
            &[
                "--default-publish-mode",
                "pr",
                "--moonmind-default-publish-mode",
                "none",
            ],
        );
        let err = Config::load(args, |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--default-publish-mode=\"pr\" and --moonmind-default-publish-mode=\"none\" \
             disagree; set only one of them, or both to the same value"
        );
    }

    #[test]
    fn publish_default_is_pr_and_honours_the_flag() {
        let site = site();
        let config = Config::load(args(site.path()), |_| None).unwrap();
        assert_eq!(config.settings.defaults.publish_mode.as_str(), "pr");
        let args = args_with(site.path(), &["--default-publish-mode", "branch"]);
        let config = Config::load(args, |_| None).unwrap();
        assert_eq!(config.settings.defaults.publish_mode.as_str(), "branch");
    }

    #[test]
    fn tasks_publish_without_approval_unless_the_server_requires_it() {
        let site = site();
        let config = Config::load(args(site.path()), |_| None).unwrap();
        assert!(!config.settings.defaults.approval_required);
        let args = args_with(site.path(), &["--require-approval"]);
        let config = Config::load(args, |_| None).unwrap();
        assert!(config.settings.defaults.approval_required);
    }

    #[test]
    fn missing_site_says_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = Config::load(args(dir.path()), |_| None).unwrap_err();
        assert!(err.to_string().contains("cargo leptos build"), "{err}");
    }

    #[test]
    fn ipv6_hosts_are_accepted() {
        let site = site();
        let mut a = args(site.path());
        a.host = "::1".into();
        assert!(Config::load(a, |_| None).unwrap().addr.is_ipv6());
    }
}
