//! `stepwise serve`'s webhook flags, and the `webhooks::WebhookConfig` they become, checked
//! before anything starts.

use clap::Args;

use super::error::ConfigError;
use crate::webhooks::{Format, Target, WebhookConfig, redacted};

/// The shortest key a webhook may be signed with.
const MIN_SECRET_CHARS: usize = 16;

/// Where jobs' ends are posted.
#[derive(Clone, Args)]
pub struct NotifyArgs {
    /// Post each job's end (and its wait for approval) to this address as JSON; repeat it or
    /// give a comma list. Needs --webhook-secret.
    #[arg(
        long = "webhook",
        env = "STEPWISE_WEBHOOKS",
        value_name = "URL",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub webhooks: Vec<String>,
    /// The same, as a Slack incoming webhook's `{"text": …}`.
    #[arg(
        long = "slack-webhook",
        env = "STEPWISE_SLACK_WEBHOOKS",
        value_name = "URL",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub slack_webhooks: Vec<String>,
    /// The key the server's webhooks are signed with (HMAC-SHA256), at least 16 characters;
    /// prefer the variable to the flag, which other users may see in the process list.
    #[arg(
        long,
        env = "STEPWISE_WEBHOOK_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub webhook_secret: Option<String>,
    /// Let a task name a webhook of its own (task.notify.webhookUrl). The server posts to
    /// it, so a task can reach whatever the server reaches: only where everyone who may
    /// submit is trusted with that. Needs --task-webhook-secret.
    #[arg(
        long,
        env = "STEPWISE_TASK_WEBHOOKS",
        default_value_t = false,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub task_webhooks: bool,
    /// The key the tasks' webhooks are signed with, never the server's: a task's receiver
    /// then holds no body the server's own receivers would take.
    #[arg(
        long,
        env = "STEPWISE_TASK_WEBHOOK_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub task_webhook_secret: Option<String>,
    /// Where people reach the dashboard, for the job's link in a notification [default:
    /// the address the server listens on].
    #[arg(long, env = "STEPWISE_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
}

impl Default for NotifyArgs {
    /// As if no flag were given.
    fn default() -> Self {
        NotifyArgs {
            webhooks: Vec::new(),
            slack_webhooks: Vec::new(),
            webhook_secret: None,
            task_webhooks: false,
            task_webhook_secret: None,
            public_url: None,
        }
    }
}

/// Never a secret, nor an address (which may hold one).
impl std::fmt::Debug for NotifyArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |urls: &[String]| urls.iter().map(|u| redacted(u)).collect::<Vec<_>>();
        f.debug_struct("NotifyArgs")
            .field("webhooks", &shown(&self.webhooks))
            .field("slack_webhooks", &shown(&self.slack_webhooks))
            .field("task_webhooks", &self.task_webhooks)
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

impl NotifyArgs {
    /// The webhooks' configuration, every address and key checked.
    pub fn resolve(self) -> Result<WebhookConfig, ConfigError> {
        let mut targets = Vec::new();
        for (flag, urls, format) in [
            ("--webhook", self.webhooks, Format::Json),
            ("--slack-webhook", self.slack_webhooks, Format::Slack),
        ] {
            for url in urls.into_iter().filter(|u| !u.trim().is_empty()) {
                check_url(flag, &url)?;
                targets.push(Target { url, format });
            }
        }
        let secret = key("--webhook-secret", self.webhook_secret)?;
        if secret.is_none() && !targets.is_empty() {
            return Err(ConfigError::Flag {
                flag: "--webhook",
                value: redacted(&targets[0].url),
                reason: "needs --webhook-secret (STEPWISE_WEBHOOK_SECRET), which signs every post"
                    .into(),
            });
        }
        let task_secret = key("--task-webhook-secret", self.task_webhook_secret)?;
        if self.task_webhooks && task_secret.is_none() {
            return Err(ConfigError::Flag {
                flag: "--task-webhooks",
                value: "true".into(),
                reason: "needs --task-webhook-secret (STEPWISE_TASK_WEBHOOK_SECRET), which signs the tasks' posts".into(),
            });
        }
        if task_secret.is_some() && task_secret == secret {
            return Err(ConfigError::Flag {
                flag: "--task-webhook-secret",
                value: "…".into(),
                reason: "must differ from --webhook-secret: a task's receiver would hold bodies the server's own receivers take".into(),
            });
        }
        if let Some(url) = &self.public_url {
            check_url("--public-url", url)?;
        }
        Ok(WebhookConfig {
            targets,
            secret,
            task_webhooks: self.task_webhooks,
            task_secret,
            public_url: self.public_url,
            ..WebhookConfig::new()
        })
    }
}

fn check_url(flag: &'static str, url: &str) -> Result<(), ConfigError> {
    contract::rules::webhook_url(url).map_err(|reason| ConfigError::Flag {
        flag,
        value: redacted(url),
        reason,
    })
}

/// A signing key: blank is none; a short one is refused without being shown.
fn key(flag: &'static str, secret: Option<String>) -> Result<Option<String>, ConfigError> {
    let secret = secret.filter(|s| !s.is_empty());
    if secret
        .as_ref()
        .is_some_and(|s| s.chars().count() < MIN_SECRET_CHARS)
    {
        return Err(ConfigError::Flag {
            flag,
            value: "…".into(),
            reason: format!(
                "must be at least {MIN_SECRET_CHARS} characters: a receiver trusts what it signs"
            ),
        });
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notify(webhooks: &[&str], secret: Option<&str>) -> NotifyArgs {
        NotifyArgs {
            webhooks: webhooks.iter().map(|w| w.to_string()).collect(),
            webhook_secret: secret.map(str::to_string),
            ..NotifyArgs::default()
        }
    }

    #[test]
    fn webhooks_need_a_secret_and_http_addresses_and_never_show_their_path() {
        let err = notify(&["https://hooks.example/T0/SECRET"], None)
            .resolve()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--webhook \"https://hooks.example/…\": needs --webhook-secret (STEPWISE_WEBHOOK_SECRET), which signs every post"
        );
        let err = notify(&["https://hooks.example/x"], Some("short"))
            .resolve()
            .unwrap_err();
        assert!(err.to_string().contains("at least 16 characters"), "{err}");
        assert!(!err.to_string().contains("short"), "{err}");
        let err = notify(&["hooks.example/x"], Some("a-long-enough-secret"))
            .resolve()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("must be an http:// or https:// address"),
            "{err}"
        );
        let args = notify(
            &["https://a.example/1", "http://b.example:8080/2"],
            Some("a-long-enough-secret"),
        );
        let shown = format!("{args:?}");
        let config = args.resolve().unwrap();
        assert_eq!(config.targets.len(), 2);
        assert!(
            !config.task_webhooks,
            "task webhooks are off unless asked for"
        );
        let shown = format!("{shown} {config:?}");
        assert!(
            !shown.contains("a-long-enough-secret") && !shown.contains("/1"),
            "{shown}"
        );
    }

    #[test]
    fn task_webhooks_need_a_key_of_their_own() {
        let on = |task_secret: Option<&str>| NotifyArgs {
            task_webhooks: true,
            task_webhook_secret: task_secret.map(str::to_string),
            ..notify(&[], Some("the-servers-own-secret"))
        };
        let err = on(None).resolve().unwrap_err();
        assert!(
            err.to_string().contains("needs --task-webhook-secret"),
            "{err}"
        );
        let err = on(Some("the-servers-own-secret")).resolve().unwrap_err();
        assert!(
            err.to_string()
                .contains("must differ from --webhook-secret"),
            "{err}"
        );
        let config = on(Some("a-key-for-the-tasks")).resolve().unwrap();
        assert!(config.task_webhooks);
        assert_eq!(config.task_secret.as_deref(), Some("a-key-for-the-tasks"));
    }
}
