//! One try of one notification from the outbox: to every webhook it is not yet done with,
//! at once, each signed anew, each outcome recorded on the job. A webhook is done with once
//! it took the post, refused it (4xx but 408 and 429), or ran out of tries; one that is down
//! or answers 5xx, 408 or 429 is tried again at the next try, `backoff × 4^(try-1)` later.
//! A webhook's address may hold a secret (Slack's do), so only its scheme and host are
//! ever written down, and in the outbox only a digest of it.

use std::sync::Arc;
use std::time::Duration;

use contract::api::webhook::{
    DELIVERY_HEADER, EVENT_HEADER, EVENTS, JOB_ENDED, SIGNATURE_HEADER, WebhookBody, WebhookJob,
    signed_text,
};
use contract::events::NotificationOutcome;
use contract::{Job, NormalizedTask};
use hmac::{Hmac, Mac};
use queue::{Notice, Settled};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::body;
use super::target::{Ended, Format, Target, WebhookConfig, redacted};

/// The `Stepwise-Signature` of `body` sent at `timestamp` (Unix seconds) with `secret`:
/// `t=<timestamp>,v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`.
pub fn signature(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(signed_text(timestamp, body).as_bytes());
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// How one try ended.
enum Tried {
    Delivered(u16),
    /// Its status, or why there was none; and whether another try may do better.
    Failed(String, bool),
}

/// A webhook of this job, and the key it is signed with.
struct Addressed {
    target: Target,
    secret: Option<String>,
    /// Whose it is, for what to set when there is no key.
    task: bool,
    /// What the outbox knows it by: a digest of its address, never the address.
    key: String,
}

impl Addressed {
    fn new(target: Target, secret: Option<String>, task: bool) -> Addressed {
        // One address given as JSON and as Slack is two webhooks.
        let format = match target.format {
            Format::Json => "json",
            Format::Slack => "slack",
        };
        let digest = Sha256::digest(format!("{format} {}", target.url).as_bytes());
        let key = format!(
            "{}:{}",
            if task { "task" } else { "server" },
            &hex::encode(digest)[..16]
        );
        Addressed {
            target,
            secret,
            task,
            key,
        }
    }
}

/// What a try needs; cheap to clone.
#[derive(Clone)]
pub(super) struct Deliveries {
    pub(super) config: Arc<WebhookConfig>,
    pub(super) queue: queue::Queue,
    pub(super) http: reqwest::Client,
}

impl Deliveries {
    /// Tries `notice` once, to every webhook it is not done with, at once; says what is
    /// left of it.
    pub(super) async fn try_notice(&self, notice: &Notice) -> Settled {
        // A job deleted since takes its outbox rows with it; one that cannot be read now
        // is tried again later.
        let job = match self.queue.get_job(&notice.job_id).await {
            Ok(job) => job,
            Err(queue::QueueError::NotFound { .. }) => return Settled::Done,
            Err(error) if notice.attempt < self.config.attempts.max(1) => {
                tracing::warn!(job_id = %notice.job_id, %error, "a notification's job could not be read; trying again later");
                return self.later(notice, notice.settled.clone());
            }
            Err(error) => {
                tracing::error!(job_id = %notice.job_id, %error, "a notification's job could not be read on its last try; its notification is dropped");
                return Settled::Done;
            }
        };
        // Told as the event left it, whatever the job did since.
        let ended = Ended {
            job: Job {
                status: notice.status,
                ..job
            },
            event: EVENTS
                .into_iter()
                .find(|&event| event == notice.event)
                .unwrap_or(JOB_ENDED),
        };
        let mut settled = notice.settled.clone();
        let targets: Vec<Addressed> = self
            .targets(&ended, &mut settled)
            .await
            .into_iter()
            .filter(|to| !settled.contains(&to.key))
            .collect();
        if targets.is_empty() {
            return Settled::Done;
        }
        let job = body::build(&self.queue, &ended, self.config.public_url.as_deref()).await;
        let tries = targets
            .iter()
            .map(|to| self.deliver(&ended, &job, to, notice));
        let done = futures_util::future::join_all(tries).await;
        for (to, done) in targets.iter().zip(done) {
            if done {
                settled.push(to.key.clone());
            }
        }
        if targets.iter().all(|to| settled.contains(&to.key)) {
            Settled::Done
        } else {
            self.later(notice, settled)
        }
    }

    /// The next try of `notice`, for the webhooks not in `settled`.
    fn later(&self, notice: &Notice, settled: Vec<String>) -> Settled {
        let wait = chrono::Duration::from_std(self.wait_after(notice.attempt))
            .unwrap_or(chrono::Duration::days(1));
        let now = self.queue.now();
        Settled::Later {
            settled,
            next_at: now.checked_add_signed(wait).unwrap_or(now),
        }
    }

    /// How long after try `attempt` the next one comes: the backoff, four times longer
    /// after each try, and never more than a day.
    fn wait_after(&self, attempt: u32) -> Duration {
        let factor = 4u32.saturating_pow(attempt.saturating_sub(1));
        self.config
            .backoff
            .saturating_mul(factor)
            .min(Duration::from_secs(24 * 3600))
    }

    /// The webhooks that should hear of `ended`: the server's, and the task's own when the
    /// server posts to tasks' webhooks. A task's webhook this server does not post to is
    /// said once, on the first try, and settled.
    async fn targets(&self, ended: &Ended, settled: &mut Vec<String>) -> Vec<Addressed> {
        let config = &self.config;
        let mut targets: Vec<Addressed> = config
            .targets
            .iter()
            .map(|target| Addressed::new(target.clone(), config.secret.clone(), false))
            .collect();
        if let Some(url) = task_webhook(&ended.job) {
            let task = Addressed::new(
                Target {
                    url: url.clone(),
                    format: Format::Json,
                },
                config.task_secret.clone(),
                true,
            );
            if config.task_webhooks {
                targets.push(task);
            } else if !settled.contains(&task.key) {
                self.tell_not_posted(ended, &url).await;
                settled.push(task.key);
            }
        }
        targets
    }

    /// On a server that posts to no task's webhook, says so on `ended`'s job when its task
    /// names one.
    pub(super) async fn tell_task_webhook_off(&self, ended: &Ended) {
        if let Some(url) = task_webhook(&ended.job) {
            self.tell_not_posted(ended, &url).await;
        }
    }

    async fn tell_not_posted(&self, ended: &Ended, url: &str) {
        let why = format!(
            "not posted to the task's webhook {}: this server posts to no task's webhook (--task-webhooks)",
            redacted(url)
        );
        self.record(&ended.job, false, why, outcome(url, ended, 0))
            .await;
    }

    /// Posts `job` to `to` once; whether `to` is done with (delivered, refused, or out of
    /// tries).
    async fn deliver(
        &self,
        ended: &Ended,
        job: &WebhookJob,
        to: &Addressed,
        notice: &Notice,
    ) -> bool {
        let url = &to.target.url;
        let shown = redacted(url);
        let Some(secret) = to.secret.as_deref() else {
            let (flag, var) = if to.task {
                ("--task-webhook-secret", "STEPWISE_TASK_WEBHOOK_SECRET")
            } else {
                ("--webhook-secret", "STEPWISE_WEBHOOK_SECRET")
            };
            let why = format!(
                "not posted to {shown}: the server has no webhook secret to sign it with; set {flag} ({var})"
            );
            self.record(&ended.job, false, why, outcome(url, ended, 0))
                .await;
            return true;
        };
        // The same on every try and every replica: a receiver drops a repeat by it.
        let delivery_id = delivery_id(notice, &to.key);
        let text = match to.target.format {
            Format::Json => serde_json::to_string(&WebhookBody {
                event: ended.event.to_string(),
                delivery_id: delivery_id.clone(),
                sent_at: chrono::Utc::now(),
                job: job.clone(),
            }),
            Format::Slack => {
                serde_json::to_string(&json!({ "text": body::slack_text(ended.event, job) }))
            }
        }
        .expect("a body serializes");
        let attempts = self.config.attempts.max(1);
        let attempt = notice.attempt;
        let tried = self
            .try_once(secret, &delivery_id, ended.event, url, &text)
            .await;
        let mut told = outcome(url, ended, attempt);
        told.delivery_id = Some(delivery_id);
        match tried {
            Tried::Delivered(status) => {
                told.status = Some(status);
                let message = format!("notified {shown} ({status}), attempt {attempt}");
                self.record(&ended.job, true, message, told).await;
                true
            }
            Tried::Failed(why, retryable) => {
                let again = retryable && attempt < attempts;
                told.error = Some(why.clone());
                told.retrying = Some(again);
                let next = if again {
                    format!(
                        "trying again in {} s (attempt {attempt} of {attempts})",
                        self.wait_after(attempt).as_secs_f64()
                    )
                } else if retryable {
                    format!("gave up after {attempts} attempts: check that the receiver is up")
                } else {
                    "not tried again: the receiver refused it; check its address and that it verifies with this server's secret".into()
                };
                let message = format!("could not notify {shown}: {why}; {next}");
                self.record(&ended.job, false, message, told).await;
                !again
            }
        }
    }

    async fn try_once(
        &self,
        secret: &str,
        delivery_id: &str,
        event: &str,
        url: &str,
        text: &str,
    ) -> Tried {
        let timestamp = chrono::Utc::now().timestamp();
        let sent = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature(secret, timestamp, text))
            .header(EVENT_HEADER, event)
            .header(DELIVERY_HEADER, delivery_id)
            .body(text.to_string())
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => {
                Tried::Delivered(answer.status().as_u16())
            }
            Ok(answer) => {
                let status = answer.status();
                let retryable = status.is_server_error()
                    || status == reqwest::StatusCode::REQUEST_TIMEOUT
                    || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
                Tried::Failed(format!("it answered {}", status.as_u16()), retryable)
            }
            // Without the address, which may hold a secret.
            Err(error) => Tried::Failed(error.without_url().to_string(), true),
        }
    }

    /// Records an attempt's outcome on the job; one that cannot take it (gone) is logged.
    async fn record(&self, job: &Job, delivered: bool, message: String, told: NotificationOutcome) {
        let payload = match serde_json::to_value(&told) {
            Ok(serde_json::Value::Object(payload)) => payload,
            _ => serde_json::Map::new(),
        };
        if let Err(error) = self
            .queue
            .record_notification(&job.id, delivered, message, payload)
            .await
        {
            tracing::warn!(job_id = %job.id, %error, "a webhook's outcome could not be recorded");
        }
    }
}

/// The webhook the job's task names of its own (`task.notify.webhookUrl`), if any.
fn task_webhook(job: &Job) -> Option<String> {
    NormalizedTask::from_job(job)
        .ok()
        .and_then(|t| t.payload.task.notify)
        .map(|n| n.webhook_url)
}

/// What an attempt's event says, before its outcome.
fn outcome(url: &str, ended: &Ended, attempt: u32) -> NotificationOutcome {
    NotificationOutcome {
        webhook: redacted(url),
        event: ended.event.to_string(),
        attempt,
        delivery_id: None,
        status: None,
        error: None,
        retrying: None,
    }
}

/// The delivery id of `notice` to the webhook `key`, in UUID form: derived from the job,
/// its event and the webhook, so every try and every replica sends the same.
fn delivery_id(notice: &Notice, key: &str) -> String {
    let digest = Sha256::digest(format!("{}/{}/{key}", notice.job_id, notice.event_id));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // Version 8 (custom), RFC 9562 variant.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_of_the_timestamp_and_body() {
        // Python's hmac module, over the same key and text, says so.
        assert_eq!(
            signature("Jefe", 1, "what do ya want for nothing?"),
            "t=1,v1=a9049465ce89cfb8e9aac62333abda66f80e3403f51f57f6bae3c3a4485eca38"
        );
    }
}
