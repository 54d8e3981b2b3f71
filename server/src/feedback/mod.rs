//! Pull request feedback (`task.publish.feedback`): after a job opened its pull request,
//! the server watches it, holding no worker slot. A failed check run or a review that asks
//! for changes becomes the job's next round, with what it said in the round's step; past
//! `maxRounds` the job asks for a person (`job.needs_attention`).
//!
//! The watches are rows the database writes with the job's completion (queue's
//! `pr_watches`); every replica's service leases due rows and looks (`look.rs`), reading
//! GitHub's REST API (`crate::github::api`) and telling the round what it read (`text.rs`). A look
//! finds nothing new, and the next is later each time; GitHub's webhooks
//! (`POST /api/integrations/github`) bring a watch's next look forward. A cause of
//! feedback makes one round however many replicas see it: the queue takes each cause once.

mod look;
mod text;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::github::api as github;
pub use crate::github::api::PullRef;

/// Where the GitHub API is and how often a pull request is looked at.
#[derive(Clone)]
pub struct FeedbackConfig {
    /// `https://api.github.com`, or a GitHub Enterprise's `https://HOST/api/v3`.
    pub api_url: String,
    /// The credential the API is read with (a task's own stays on its worker).
    pub token: Option<String>,
    /// The wait after a look that found nothing new, doubled each time after.
    pub poll: Duration,
    /// The longest wait between two looks.
    pub max_poll: Duration,
    /// One call's timeout.
    pub timeout: Duration,
}

impl std::fmt::Debug for FeedbackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedbackConfig")
            .field("api_url", &self.api_url)
            .field("token", &self.token.as_ref().map(|_| "[REDACTED]"))
            .field("poll", &self.poll)
            .field("max_poll", &self.max_poll)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Default for FeedbackConfig {
    fn default() -> Self {
        FeedbackConfig {
            api_url: "https://api.github.com".into(),
            token: None,
            poll: Duration::from_secs(30),
            max_poll: Duration::from_secs(600),
            timeout: Duration::from_secs(20),
        }
    }
}

/// Looks at the watched pull requests that are due. The River shape: `new`, then `start`;
/// `run_once` is one pass.
pub struct FeedbackService {
    config: FeedbackConfig,
    queue: queue::Queue,
    api: github::GitHubApi,
    /// What this replica's leases are held as.
    owner: String,
    wake: Arc<Notify>,
}

/// Watches one replica looks at in one pass.
const AT_ONCE: u32 = 8;

impl FeedbackService {
    /// The service over `queue`, woken at once by `wake` (what a GitHub delivery this
    /// replica took notifies).
    pub fn new(config: FeedbackConfig, queue: queue::Queue, wake: Arc<Notify>) -> FeedbackService {
        let api = github::GitHubApi::new(&config.api_url, config.timeout);
        let mut nonce = [0u8; 6];
        getrandom::fill(&mut nonce).unwrap_or_default();
        let owner = format!("feedback-{}-{}", std::process::id(), hex::encode(nonce));
        FeedbackService {
            config,
            queue,
            api,
            owner,
            wake,
        }
    }

    /// A look reads a few pages of GitHub, each within the timeout; a replica that stops
    /// mid-look leaves its lease to run out.
    fn lease(&self) -> Duration {
        self.config.timeout.saturating_mul(6) + Duration::from_secs(5)
    }

    /// Looks at every watch due now, a few at a time; how many.
    pub async fn run_once(&self) -> usize {
        let mut looked = 0;
        loop {
            let due = match self
                .queue
                .claim_watches(&self.owner, self.lease(), AT_ONCE)
                .await
            {
                Ok(due) => due,
                Err(error) => {
                    tracing::warn!(%error, "the pull request watches could not be read");
                    return looked;
                }
            };
            if due.is_empty() {
                return looked;
            }
            looked += due.len();
            futures_util::future::join_all(due.into_iter().map(|watch| self.look(watch))).await;
        }
    }

    /// Looks at what falls due until `stop`.
    pub fn start(self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let tick = (self.config.poll / 2).clamp(Duration::from_millis(50), Duration::from_secs(5));
        tokio::spawn(async move {
            loop {
                self.run_once().await;
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(tick) => {}
                }
            }
        })
    }
}
