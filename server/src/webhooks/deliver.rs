//! One delivery: the body posted to one webhook, signed anew on each try, tried again with
//! backoff while the receiver is down or answers 5xx, 408 or 429; each try's outcome
//! recorded on the job. A webhook's address may hold a secret (Slack's do), so only its
//! scheme and host are ever written down.

use contract::api::webhook::{
    DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, WebhookBody, WebhookJob, signed_text,
};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use super::{Ended, Format, Once, Target, body};

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

/// The address as it may be shown: its scheme and host, the rest (a path, a query, a
/// user, any of which may be a secret) left out.
pub fn redacted(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or("");
    format!("{scheme}://{host}/…")
}

/// How one try ended.
enum Tried {
    Delivered(u16),
    /// Its status, or why there was none; and whether another try may do better.
    Failed(String, bool),
}

impl Once {
    pub(super) async fn deliver(&self, ended: &Ended, job: &WebhookJob, target: &Target) {
        let Some(secret) = self.config.secret.as_deref() else {
            let why = format!(
                "not posted to {}: the server has no webhook secret to sign it with; set --webhook-secret (STEPWISE_WEBHOOK_SECRET)",
                redacted(&target.url)
            );
            self.record(&ended.job, false, why, &target.url, None).await;
            return;
        };
        let delivery_id = uuid_v4_text();
        let text = match target.format {
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
                .try_once(secret, &delivery_id, ended.event, &target.url, &text)
                .await;
            let mut payload = Map::new();
            payload.insert("deliveryId".into(), delivery_id.clone().into());
            payload.insert("event".into(), ended.event.into());
            payload.insert("attempt".into(), attempt.into());
            let shown = redacted(&target.url);
            match tried {
                Tried::Delivered(status) => {
                    payload.insert("status".into(), status.into());
                    let message = format!("notified {shown} ({status}), attempt {attempt}");
                    self.record(&ended.job, true, message, &target.url, Some(payload))
                        .await;
                    return;
                }
                Tried::Failed(why, retryable) => {
                    let again = retryable && attempt < attempts;
                    payload.insert("error".into(), Value::String(why.clone()));
                    payload.insert("retrying".into(), again.into());
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
                    self.record(&ended.job, false, message, &target.url, Some(payload))
                        .await;
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
