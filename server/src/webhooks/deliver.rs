//! The deliveries of one job's notification: to every webhook at once, each signed anew on
//! each try, tried again with backoff while the receiver is down or answers 5xx, 408 or
//! 429, each try's outcome recorded on the job. A webhook's address may hold a secret
//! (Slack's do), so only its scheme and host are ever written down.

use std::sync::Arc;

use contract::api::webhook::{
    DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, WebhookBody, WebhookJob, signed_text,
};
use contract::events::NotificationOutcome;
use contract::{Job, NormalizedTask};
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

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
}

/// What one job's notifications need; cheap to clone.
#[derive(Clone)]
pub(super) struct Deliveries {
    pub(super) config: Arc<WebhookConfig>,
    pub(super) queue: queue::Queue,
    pub(super) http: reqwest::Client,
}

impl Deliveries {
    /// Posts `ended` to every webhook that should hear of it, at once; returns when each
    /// delivered or gave up.
    pub(super) async fn run_once(&self, ended: Ended) {
        let config = &self.config;
        let mut targets: Vec<Addressed> = config
            .targets
            .iter()
            .map(|target| Addressed {
                target: target.clone(),
                secret: config.secret.clone(),
                task: false,
            })
            .collect();
        let own = NormalizedTask::from_job(&ended.job)
            .ok()
            .and_then(|t| t.payload.task.notify)
            .map(|n| n.webhook_url);
        if let Some(url) = own {
            if config.task_webhooks {
                targets.push(Addressed {
                    target: Target {
                        url,
                        format: Format::Json,
                    },
                    secret: config.task_secret.clone(),
                    task: true,
                });
            } else {
                let why = format!(
                    "not posted to the task's webhook {}: this server posts to no task's webhook (--task-webhooks)",
                    redacted(&url)
                );
                self.record(&ended.job, false, why, outcome(&url, &ended, 0))
                    .await;
            }
        }
        if targets.is_empty() {
            return;
        }
        let job = body::build(&self.queue, &ended, config.public_url.as_deref()).await;
        let deliveries = targets.iter().map(|to| self.deliver(&ended, &job, to));
        futures_util::future::join_all(deliveries).await;
    }

    async fn deliver(&self, ended: &Ended, job: &WebhookJob, to: &Addressed) {
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
            return;
        };
        let delivery_id = uuid_v4_text();
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
        let mut wait = self.config.backoff;
        for attempt in 1..=attempts {
            let tried = self
                .try_once(secret, &delivery_id, ended.event, url, &text)
                .await;
            let mut told = outcome(url, ended, attempt);
            told.delivery_id = Some(delivery_id.clone());
            match tried {
                Tried::Delivered(status) => {
                    told.status = Some(status);
                    let message = format!("notified {shown} ({status}), attempt {attempt}");
                    self.record(&ended.job, true, message, told).await;
                    return;
                }
                Tried::Failed(why, retryable) => {
                    let again = retryable && attempt < attempts;
                    told.error = Some(why.clone());
                    told.retrying = Some(again);
                    let next = if again {
                        format!(
                            "trying again in {} s (attempt {attempt} of {attempts})",
                            wait.as_secs_f64()
                        )
                    } else if retryable {
                        format!("gave up after {attempts} attempts: check that the receiver is up")
                    } else {
                        "not tried again: the receiver refused it; check its address and that it verifies with this server's secret".into()
                    };
                    let message = format!("could not notify {shown}: {why}; {next}");
                    self.record(&ended.job, false, message, told).await;
                    if !again {
                        return;
                    }
                    tokio::time::sleep(wait).await;
                    wait = wait.saturating_mul(4);
                }
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

/// A random delivery id (UUID v4 form) from the OS's randomness.
fn uuid_v4_text() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).unwrap_or_default();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
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
