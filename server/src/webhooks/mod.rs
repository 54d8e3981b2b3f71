//! Webhooks: when a job ends, or waits for an operator's approval, the server posts it,
//! signed, to each webhook the server names (`--webhook`, `--slack-webhook`) and to the
//! task's own (`task.notify.webhookUrl`). The notification is a row of the queue's outbox,
//! written with the event in one transaction; every replica's service claims due rows with
//! a lease, tries each once and settles it or leaves it for a later try with backoff, so a
//! replica that stops between tries loses nothing. What became of each attempt is recorded
//! on the job as an event. The queue's [`Observer`](queue::Observer) wakes this replica's
//! service as it ends a job, so its own ends are posted without waiting for a poll.
//!
//! `target` says where notifications go; `body` builds what is posted; `deliver` makes one
//! try of one notification.

mod body;
mod deliver;
mod target;

use std::sync::Arc;
use std::time::Duration;

use contract::Job;
use contract::job::events;
use deliver::Deliveries;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use deliver::signature;
pub use target::{Ended, Format, Target, WebhookConfig, redacted};

/// The queue's observer: hands each end (or wait for approval) this replica wrote to the
/// service, which looks at the outbox at once for it. Never blocks.
#[derive(Debug)]
pub struct Inbox(mpsc::UnboundedSender<Ended>);

impl queue::Observer for Inbox {
    fn recorded(&self, job: &Job, kind: &str, _payload: &Map<String, Value>) {
        use contract::api::webhook::{JOB_AWAITING_APPROVAL, JOB_ENDED, JOB_NEEDS_ATTENTION};
        let event = match kind {
            kind if events::ENDINGS.contains(&kind) => JOB_ENDED,
            events::JOB_APPROVAL_REQUESTED => JOB_AWAITING_APPROVAL,
            events::JOB_NEEDS_ATTENTION => JOB_NEEDS_ATTENTION,
            _ => return,
        };
        // The service gone (the server stopping): the outbox keeps it for the next.
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

/// Posts what the outbox holds. The River shape: `new`, then `start`. Each replica runs
/// one; they share the outbox, each notification claimed by one at a time.
pub struct WebhookService {
    config: Arc<WebhookConfig>,
    queue: queue::Queue,
    http: reqwest::Client,
    inbox: mpsc::UnboundedReceiver<Ended>,
    /// What this replica's claims are leased to.
    owner: String,
}

/// Notifications tried at once by one replica.
const AT_ONCE: usize = 16;

/// How often a replica says again that it posts (the database listens to one for ten
/// minutes).
const LISTEN_EVERY: Duration = Duration::from_secs(60);

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
        let mut nonce = [0u8; 6];
        getrandom::fill(&mut nonce).unwrap_or_default();
        let owner = format!("replica-{}-{}", std::process::id(), hex::encode(nonce));
        WebhookService {
            config: Arc::new(config),
            queue,
            http,
            inbox,
            owner,
        }
    }

    /// How long a claim is this replica's: a try posts to every webhook at once, each
    /// within the timeout, and records each outcome. A replica that stops mid-try leaves
    /// its claim to run out; one that stops between tries leaves nothing held.
    fn lease(&self) -> Duration {
        self.config.timeout.saturating_mul(2) + Duration::from_secs(5)
    }

    /// How often the outbox is looked at: as often as the shortest wait between tries, at
    /// most every second. This replica's own ends are looked at as they come.
    fn poll(&self) -> Duration {
        self.config
            .backoff
            .clamp(Duration::from_millis(20), Duration::from_secs(1))
    }

    /// Says that this replica posts, then posts what falls due until `stop`; a try under
    /// way then is dropped, and its claim runs out for the next replica (or the next start)
    /// to take. A replica with nothing to post (no webhook, and tasks' webhooks off) takes
    /// no part in the outbox: it neither listens nor claims, so it never settles a
    /// notification another replica would post. It only tells, on the jobs it ends, that
    /// their task's own webhook is not posted to.
    pub async fn start(mut self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        if self.config.targets.is_empty() && !self.config.task_webhooks {
            let once = self.once();
            return tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        ended = self.inbox.recv() => match ended {
                            Some(ended) => once.tell_task_webhook_off(&ended).await,
                            None => break,
                        },
                    }
                }
            });
        }
        self.listen().await;
        tokio::spawn(async move {
            let mut running = tokio::task::JoinSet::new();
            let mut inbox_open = true;
            let poll = self.poll();
            let mut listened = tokio::time::Instant::now();
            loop {
                if listened.elapsed() >= LISTEN_EVERY {
                    self.listen().await;
                    listened = tokio::time::Instant::now();
                }
                let free = AT_ONCE.saturating_sub(running.len());
                if free > 0 {
                    match self
                        .queue
                        .claim_notifications(&self.owner, self.lease(), free as u32)
                        .await
                    {
                        Ok(notices) => {
                            for notice in notices {
                                let once = self.once();
                                let owner = self.owner.clone();
                                running.spawn(async move { once.run(notice, &owner).await });
                            }
                        }
                        Err(error) => {
                            tracing::warn!(%error, "the webhook outbox could not be read")
                        }
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => break,
                    Some(_) = running.join_next(), if !running.is_empty() => {}
                    ended = self.inbox.recv(), if inbox_open => inbox_open = ended.is_some(),
                    _ = tokio::time::sleep(poll) => {}
                }
            }
            // The listening stays: it lapses by itself in ten minutes. Ends written while
            // this replica restarts (a rescuer's pass on another replica, say) are kept for
            // it, rather than lost.
            running.abort_all();
        })
    }

    /// Says (again) that this replica posts: the database writes notifications while one
    /// has said so within ten minutes.
    async fn listen(&self) {
        if let Err(error) = self.queue.listen_for_notifications(&self.owner).await {
            tracing::warn!(%error, "could not say that this replica posts webhooks; trying again in a minute");
        }
    }

    fn once(&self) -> Deliveries {
        Deliveries {
            config: self.config.clone(),
            queue: self.queue.clone(),
            http: self.http.clone(),
        }
    }
}

impl Deliveries {
    /// Tries `notice` once and settles it under `owner`'s claim.
    async fn run(&self, notice: queue::Notice, owner: &str) {
        let settled = self.try_notice(&notice).await;
        match self
            .queue
            .settle_notification(&notice, owner, &settled)
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                job_id = %notice.job_id,
                "a notification's try outlasted its claim; another replica has it now"
            ),
            Err(error) => {
                tracing::warn!(job_id = %notice.job_id, %error, "a notification's try could not be settled")
            }
        }
    }
}
