//! Where notifications go and what they tell of: the configuration, a webhook, a job to
//! tell of, and how an address may be shown. A leaf of the webhooks room.

use std::time::Duration;

use contract::Job;

/// How a webhook wants its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// [`contract::api::webhook::WebhookBody`].
    Json,
    /// Slack's incoming webhook: `{"text": "…"}`.
    Slack,
}

/// One webhook.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    pub format: Format,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {}", self.format, redacted(&self.url))
    }
}

/// How the webhooks are posted. See [`WebhookConfig::new`] for the defaults.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The server's own webhooks, posted for every job.
    pub targets: Vec<Target>,
    /// The key the server's webhooks are signed with. Without one nothing is posted to them.
    pub secret: Option<String>,
    /// Whether a task may name a webhook of its own (`task.notify.webhookUrl`). The server
    /// posts to it, so it reaches what the server reaches: off unless the operator says.
    pub task_webhooks: bool,
    /// The key the tasks' webhooks are signed with: never the server's, so that no task's
    /// receiver holds a body the server's own receivers would take.
    pub task_secret: Option<String>,
    /// Where the dashboard is reached, for the job's link (`http://host:3000`).
    pub public_url: Option<String>,
    /// Tries of one delivery in all.
    pub attempts: u32,
    /// The wait before the first retry; each next one waits four times longer.
    pub backoff: Duration,
    /// The longest one try may take.
    pub timeout: Duration,
}

impl WebhookConfig {
    /// No webhooks and no task webhooks; six tries (the retries 1, 4, 16, 64 and 256 s
    /// after a failure), 10 s each.
    pub fn new() -> WebhookConfig {
        WebhookConfig {
            targets: Vec::new(),
            secret: None,
            task_webhooks: false,
            task_secret: None,
            public_url: None,
            attempts: 6,
            backoff: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        }
    }
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig::new()
    }
}

/// Never a secret, nor an address (which may hold one): only where they go.
impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("targets", &self.targets)
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .field("task_webhooks", &self.task_webhooks)
            .field("task_secret", &self.task_secret.as_ref().map(|_| "…"))
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

/// A job to tell of: it ended, or waits for approval.
#[derive(Debug, Clone)]
pub struct Ended {
    pub job: Job,
    /// [`contract::api::webhook::JOB_ENDED`] or `JOB_AWAITING_APPROVAL`.
    pub event: &'static str,
}

/// The address as it may be shown: its scheme and host, the rest (a path, a query, a
/// user, any of which may be a secret) left out.
pub fn redacted(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or("");
    format!("{scheme}://{host}/…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_shows_its_scheme_and_host_only() {
        assert_eq!(
            redacted("https://hooks.slack.com/services/T000/B000/SECRET"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(
            redacted("http://user:pw@example.com:8080/x?token=1"),
            "http://example.com:8080/…"
        );
    }
}
