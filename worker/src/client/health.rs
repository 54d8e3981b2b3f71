//! The server's readiness, as a worker's own probe (`stepwise worker --health-port`) asks
//! for it: a worker is ready when a server it may use is.

use std::time::Duration;

use contract::api::{Health, HealthStatus};
use reqwest::Url;

use super::{ClientError, QueueClient, Result};

/// Shorter than the usual probe period, so one slow server cannot stall the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

impl QueueClient {
    /// `GET /readyz` on each server, from the one in use: ok as soon as one is ready (the
    /// claim loop moves on to it when the one in use cannot be reached), else the first
    /// one's reason.
    pub async fn server_readiness(&self) -> Health {
        let servers = &self.servers;
        let first = servers.current();
        let mut reasons = Vec::new();
        for offset in 0..servers.urls.len() {
            let url = readyz_url(servers.at(first + offset));
            match self.probe(&url).await {
                Ok(health) if health.status == HealthStatus::Ok => return health,
                Ok(health) => reasons.push(format!(
                    "the server at {} is not ready: {}",
                    servers.at(first + offset),
                    health.reason.unwrap_or_default()
                )),
                Err(error) => reasons.push(error.to_string()),
            }
        }
        Health::unavailable(reasons.join("; "))
    }

    /// One server's probe: 200 and 503 both carry a [`Health`].
    async fn probe(&self, url: &Url) -> Result<Health> {
        let response = self
            .http
            .get(url.clone())
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .map_err(|e| self.transport(url, e))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| self.transport(url, e))?;
        serde_json::from_slice(&body).map_err(|e| {
            ClientError::Decode {
                url: url.to_string(),
                detail: format!("HTTP {status}: {e}"),
            }
            .redacted(self.secret())
        })
    }
}

/// `{base}/readyz`, below a base that may carry a path prefix.
fn readyz_url(base: &Url) -> Url {
    let mut url = base.clone();
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().push("readyz");
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_keeps_a_path_prefix() {
        let base = Url::parse("https://host/stepwise/").unwrap();
        assert_eq!(readyz_url(&base).as_str(), "https://host/stepwise/readyz");
        let base = Url::parse("http://127.0.0.1:3000").unwrap();
        assert_eq!(readyz_url(&base).as_str(), "http://127.0.0.1:3000/readyz");
    }
}
