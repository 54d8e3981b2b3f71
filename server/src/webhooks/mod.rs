//! Webhooks: when a job ends, or waits for an operator's approval, the server posts it,
//! signed, to each webhook the server names (`--webhook`, `--slack-webhook`) and to the
//! task's own (`task.notify.webhookUrl`). The replica whose write ended the job posts it
//! (the queue tells its [`Observer`](queue::Observer)), in the background, retrying with
//! backoff; what became of each attempt is recorded on the job as an event.
//!
//! `body` builds what is posted; `deliver` posts it to one webhook.

mod body;
mod deliver;

use std::sync::Arc;
use std::time::Duration;

use contract::job::events;
use contract::{Job, JobState};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use deliver::{redacted, signature};

/// How a webhook wants its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// [`contract::api::webhook::WebhookBody`].
    Json,
    /// Slack's incoming webhook: `{"text": "…"}`.
    Slack,
}

/// One webhook of the server's.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    pub format: Format,
}

/// How the webhooks are posted. See [`WebhookConfig::new`] for the defaults.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The server's own webhooks, posted for every job.
    pub targets: Vec<Target>,
    /// The key of every signature. Without one nothing is posted: a task's webhook is then
    /// recorded as not sent, with what to set.
    pub secret: Option<String>,
    /// Whether a task may name a webhook of its own (`task.notify.webhookUrl`): the server
    /// posts to it, so it reaches what the server reaches.
    pub task_webhooks: bool,
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
    /// No webhooks; six tries (the retries 1, 4, 16, 64 and 256 s after a failure), 10 s
    /// each; task webhooks allowed.
    pub fn new() -> WebhookConfig {
        WebhookConfig {
            targets: Vec::new(),
            secret: None,
            task_webhooks: true,
            public_url: None,
            attempts: 6,
            backoff: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Never the secret, nor an address (which may hold one): only where they go.
impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let targets: Vec<String> = self.targets.iter().map(|t| redacted(&t.url)).collect();
        f.debug_struct("WebhookConfig")
            .field("targets", &targets)
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .field("task_webhooks", &self.task_webhooks)
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig::new()
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {}", self.format, redacted(&self.url))
    }
}

/// A job to tell of: it ended, or waits for approval.
#[derive(Debug, Clone)]
pub struct Ended {
    pub job: Job,
    /// [`contract::api::webhook::JOB_ENDED`] or `JOB_AWAITING_APPROVAL`.
    pub event: &'static str,
}

/// The queue's observer: hands each end this replica wrote to the service. Never blocks.
#[derive(Debug)]
pub struct Inbox(mpsc::UnboundedSender<Ended>);

impl queue::Observer for Inbox {
    fn recorded(&self, job: &Job, kind: &str, _payload: &Map<String, Value>) {
        use contract::api::webhook::{JOB_AWAITING_APPROVAL, JOB_ENDED};
        let event = match kind {
            events::JOB_COMPLETED
            | events::JOB_FAILED
            | events::JOB_DEAD_LETTERED
            | events::JOB_CANCELLED
                if job.status.is_terminal() && job.status != JobState::AwaitingApproval =>
            {
                JOB_ENDED
            }
            events::JOB_APPROVAL_REQUESTED => JOB_AWAITING_APPROVAL,
            _ => return,
        };
        // The service gone (the server stopping): nobody is left to post it.
        let _ = self.0.send(Ended {
            job: job.clone(),
            event,
        });
    }
}

/// The observer to give the queue, and the receiving end for [`WebhookService::new`].
pub fn inbox() -> (Arc<Inbox>, mpsc::UnboundedReceiver<Ended>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(Inbox(tx)), rx)
}

/// Posts what the [`Inbox`] received. The River shape: `new`, then `start`; `run_once`
/// posts one job's notifications (to every webhook at once) and returns when each is
/// delivered or given up.
pub struct WebhookService {
    config: Arc<WebhookConfig>,
    queue: queue::Queue,
    http: reqwest::Client,
    inbox: mpsc::UnboundedReceiver<Ended>,
}

impl WebhookService {
    pub fn new(
        config: WebhookConfig,
        queue: queue::Queue,
        inbox: mpsc::UnboundedReceiver<Ended>,
    ) -> WebhookService {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            // A redirect would post the signed body somewhere the operator did not name.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("stepwise/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        WebhookService {
            config: Arc::new(config),
            queue,
            http,
            inbox,
        }
    }

    /// Posts each job as it comes, several at once, until `stop`; deliveries under way
    /// are dropped then (each attempt made is recorded).
    pub fn start(mut self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut running = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    Some(_) = running.join_next(), if !running.is_empty() => {}
                    ended = self.inbox.recv() => {
                        let Some(ended) = ended else { break };
                        let once = self.once();
                        running.spawn(async move { once.run_once(ended).await });
                    }
                }
            }
            running.abort_all();
        })
    }

    fn once(&self) -> Once {
        Once {
            config: self.config.clone(),
            queue: self.queue.clone(),
            http: self.http.clone(),
        }
    }
}

/// What one job's notifications need; cheap to clone.
#[derive(Clone)]
pub struct Once {
    config: Arc<WebhookConfig>,
    queue: queue::Queue,
    http: reqwest::Client,
}

impl Once {
    /// Posts `ended` to every webhook that should hear of it, at once; returns when each
    /// delivered or gave up.
    pub async fn run_once(&self, ended: Ended) {
        let mut targets = self.config.targets.clone();
        let own = contract::NormalizedTask::from_job(&ended.job)
            .ok()
            .and_then(|t| t.payload.task.notify)
            .map(|n| n.webhook_url);
        if let Some(url) = own {
            if self.config.task_webhooks {
                targets.push(Target {
                    url,
                    format: Format::Json,
                });
            } else {
                let why = format!(
                    "not posted to the task's webhook {}: this server does not post to task webhooks (--task-webhooks false)",
                    redacted(&url)
                );
                self.record(&ended.job, false, why, &url, None).await;
            }
        }
        if targets.is_empty() {
            return;
        }
        let body = body::build(&self.queue, &ended, self.config.public_url.as_deref()).await;
        let deliveries = targets
            .iter()
            .map(|target| self.deliver(&ended, &body, target));
        futures_util::future::join_all(deliveries).await;
    }

    /// Records an attempt's outcome on the job; a job that cannot take it (gone) is logged.
    async fn record(
        &self,
        job: &Job,
        delivered: bool,
        message: String,
        url: &str,
        extra: Option<Map<String, Value>>,
    ) {
        let mut payload = extra.unwrap_or_default();
        payload.insert("webhook".into(), redacted(url).into());
        if let Err(error) = self
            .queue
            .record_notification(&job.id, delivered, message, payload)
            .await
        {
            tracing::warn!(job_id = %job.id, %error, "a webhook's outcome could not be recorded");
        }
    }
}
