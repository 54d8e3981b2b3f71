//! Webhooks: when a job ends, or waits for an operator's approval, the server posts it,
//! signed, to each webhook the server names (`--webhook`, `--slack-webhook`) and to the
//! task's own (`task.notify.webhookUrl`). The replica whose write ended the job posts it
//! (the queue tells its [`Observer`](queue::Observer)), in the background, retrying with
//! backoff; what became of each attempt is recorded on the job as an event.
//!
//! `target` says where notifications go; `body` builds what is posted; `deliver` posts it
//! to every webhook of a job, each with its retries.

mod body;
mod deliver;
mod target;

use std::sync::Arc;

use contract::job::events;
use contract::{Job, JobState};
use deliver::Deliveries;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use deliver::signature;
pub use target::{Ended, Format, Target, WebhookConfig, redacted};

/// The queue's observer: hands each end this replica wrote to the service. Never blocks.
#[derive(Debug)]
pub struct Inbox(mpsc::UnboundedSender<Ended>);

impl queue::Observer for Inbox {
    fn recorded(&self, job: &Job, kind: &str, _payload: &Map<String, Value>) {
        use contract::api::webhook::{JOB_AWAITING_APPROVAL, JOB_ENDED};
        let ended = job.status.is_terminal() && job.status != JobState::AwaitingApproval;
        let event = match kind {
            kind if events::ENDINGS.contains(&kind) && ended => JOB_ENDED,
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
            .expect("an HTTP client with rustls and no redirects builds");
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

    /// Posts one job's notifications now, returning when each delivered or gave up.
    pub async fn run_once(&self, ended: Ended) {
        self.once().run_once(ended).await;
    }

    fn once(&self) -> Deliveries {
        Deliveries {
            config: self.config.clone(),
            queue: self.queue.clone(),
            http: self.http.clone(),
        }
    }
}
