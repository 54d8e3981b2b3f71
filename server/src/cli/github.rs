//! `stepwise serve`'s GitHub flags: the API that pull request feedback reads, the
//! credential it reads with where a task's own is not on this server, how often it looks,
//! and the secret GitHub signs its webhook deliveries with.

use std::time::Duration;

use clap::Args;

use super::error::ConfigError;
use crate::feedback::FeedbackConfig;

/// The shortest secret a delivery may be signed with.
const MIN_SECRET_CHARS: usize = 16;

#[derive(Clone, Args)]
pub struct GitHubArgs {
    /// GitHub's REST API: `https://api.github.com`, or a GitHub Enterprise's
    /// `https://HOST/api/v3`.
    #[arg(
        long,
        env = "STEPWISE_GITHUB_API_URL",
        default_value = "https://api.github.com",
        value_name = "URL"
    )]
    pub github_api_url: String,
    /// The credential pull request feedback reads GitHub with: read access to pull
    /// requests, checks and Actions logs of the repositories tasks publish to.
    #[arg(
        long,
        env = "STEPWISE_GITHUB_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub github_token: Option<String>,
    /// The secret GitHub signs its webhook deliveries with (`X-Hub-Signature-256`), at
    /// least 16 characters: with it, `POST /api/integrations/github` takes them.
    #[arg(
        long,
        env = "STEPWISE_GITHUB_WEBHOOK_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub github_webhook_secret: Option<String>,
    /// The wait after a look at a pull request that found nothing new, doubled each time
    /// after, up to ten minutes; a webhook delivery brings the next look forward.
    #[arg(
        long,
        env = "STEPWISE_FEEDBACK_POLL_SECONDS",
        default_value_t = 30.0,
        value_name = "SECONDS"
    )]
    pub feedback_poll_seconds: f64,
}

impl std::fmt::Debug for GitHubArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubArgs")
            .field("github_api_url", &self.github_api_url)
            .field(
                "github_token",
                &self.github_token.as_ref().map(|_| "[REDACTED]"),
            )
            .field(
                "github_webhook_secret",
                &self.github_webhook_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("feedback_poll_seconds", &self.feedback_poll_seconds)
            .finish()
    }
}

impl Default for GitHubArgs {
    fn default() -> Self {
        GitHubArgs {
            github_api_url: "https://api.github.com".into(),
            github_token: None,
            github_webhook_secret: None,
            feedback_poll_seconds: 30.0,
        }
    }
}

/// The webhook secret, never shown.
#[derive(Clone)]
pub struct HookSecret(pub String);

impl std::fmt::Debug for HookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

impl GitHubArgs {
    /// The feedback service's configuration, and the webhook secret.
    pub fn resolve(&self) -> Result<(FeedbackConfig, Option<HookSecret>), ConfigError> {
        let api = self.github_api_url.trim();
        let scheme_ok = api.starts_with("https://") || api.starts_with("http://");
        if !scheme_ok || reqwest::Url::parse(api).is_err() {
            return Err(ConfigError::Flag {
                flag: "--github-api-url",
                value: api.to_string(),
                reason: "not an http(s) address".into(),
            });
        }
        let poll = self.feedback_poll_seconds;
        if !(poll.is_finite() && (0.05..=3600.0).contains(&poll)) {
            return Err(ConfigError::Flag {
                flag: "--feedback-poll-seconds",
                value: poll.to_string(),
                reason: "must be between 0.05 and 3600".into(),
            });
        }
        let secret = self.github_webhook_secret.clone().filter(|s| !s.is_empty());
        if secret
            .as_ref()
            .is_some_and(|s| s.chars().count() < MIN_SECRET_CHARS)
        {
            return Err(ConfigError::Flag {
                flag: "--github-webhook-secret",
                value: "[REDACTED]".into(),
                reason: format!("shorter than {MIN_SECRET_CHARS} characters"),
            });
        }
        let poll = Duration::from_secs_f64(poll);
        Ok((
            FeedbackConfig {
                api_url: api.to_string(),
                token: self.github_token.clone().filter(|t| !t.is_empty()),
                poll,
                max_poll: Duration::from_secs(600).max(poll),
                ..FeedbackConfig::default()
            },
            secret.map(HookSecret),
        ))
    }
}
