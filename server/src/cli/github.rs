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
    /// Which GitHub issues and comments become jobs, and the task each becomes (a JSON
    /// file; see the README's "Work from GitHub"). Read again at a delivery when it
    /// changed. Needs --github-webhook-secret and --github-token.
    #[arg(long, env = "STEPWISE_GITHUB_RULES", value_name = "FILE")]
    pub github_rules: Option<std::path::PathBuf>,
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
            .field("github_rules", &self.github_rules)
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
            github_rules: None,
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
        if let Some(rules) = &self.github_rules {
            let missing = match (&secret, &self.github_token) {
                (None, _) => Some("--github-webhook-secret (GitHub's deliveries are the source)"),
                (_, None) => Some("--github-token (to check authors and answer on the issue)"),
                _ => None,
            };
            if let Some(missing) = missing {
                return Err(ConfigError::Flag {
                    flag: "--github-rules",
                    value: rules.display().to_string(),
                    reason: format!("needs {missing}"),
                });
            }
            crate::github::rules::RulesFile::open(rules).map_err(|reason| ConfigError::Flag {
                flag: "--github-rules",
                value: rules.display().to_string(),
                reason,
            })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn with_rules(rules: &std::path::Path, secret: bool, token: bool) -> GitHubArgs {
        GitHubArgs {
            github_rules: Some(rules.to_path_buf()),
            github_webhook_secret: secret.then(|| "a-secret-of-enough-length".into()),
            github_token: token.then(|| "ghs_token".into()),
            ..GitHubArgs::default()
        }
    }

    #[test]
    fn rules_need_the_secret_the_token_and_a_file_that_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.json");
        let rule = serde_json::json!({"rules": [{"repositories": ["octo/hello"], "label": "go", "job": {"payload": {"task": {}}}}]});
        std::fs::write(&path, rule.to_string()).unwrap();
        assert!(with_rules(&path, true, true).resolve().is_ok());
        let said = |args: GitHubArgs| args.resolve().unwrap_err().to_string();
        assert!(said(with_rules(&path, false, true)).contains("--github-webhook-secret"));
        assert!(said(with_rules(&path, true, false)).contains("--github-token"));
        std::fs::write(
            &path,
            r#"{"rules": [{"repositories": ["octo/hello"], "job": {}}]}"#,
        )
        .unwrap();
        let why = said(with_rules(&path, true, true));
        assert!(
            why.contains("--github-rules") && why.contains("rules[0].label"),
            "{why}"
        );
        assert!(
            said(with_rules(&dir.path().join("absent.json"), true, true)).contains("absent.json")
        );
    }
}
