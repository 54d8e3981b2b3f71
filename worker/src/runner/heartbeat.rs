//! The heartbeat: renews a job's lease while the run goes on. Shaped like the queue's
//! background services (River's): a config with defaults, `new`, `start(stop)`, and a
//! `run_once` that tests call directly.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::lease::Lease;
use crate::client::{ClientError, QueueClient};
use crate::stages::Pause;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatConfig {
    /// Between renewals that succeeded.
    pub every: Duration,
    /// After a renewal that failed, while the lease lasts: the server may be back by then.
    pub retry_after: Duration,
}

impl HeartbeatConfig {
    /// The defaults for `lease`: renew every third of it, retry after a quarter of that.
    pub fn for_lease(lease: &Lease) -> HeartbeatConfig {
        let every = lease.heartbeat_every();
        HeartbeatConfig {
            every,
            retry_after: (every / 4).clamp(Duration::from_millis(100), Duration::from_secs(2)),
        }
    }
}

/// What one renewal found, and did about it.
#[derive(Debug)]
pub enum Beat {
    Renewed,
    /// Renewed, and the server asks for a cancel: the run was told to stop.
    CancelRequested,
    /// The server refused the renewal: the lease was taken back, and the run told to stop.
    Lost(ClientError),
    /// The server could not be reached, or failed; the lease may still last.
    Failed(ClientError),
}

pub struct Heartbeat {
    client: QueueClient,
    lease: Lease,
    config: HeartbeatConfig,
    /// Stops the run: on a cancel request and when the lease is lost.
    cancel: CancellationToken,
    /// Told of an operator's pause.
    pause: Pause,
}

impl Heartbeat {
    pub fn new(
        client: QueueClient,
        lease: Lease,
        config: HeartbeatConfig,
        cancel: CancellationToken,
    ) -> Heartbeat {
        Heartbeat {
            client,
            lease,
            config,
            cancel,
            pause: Pause::default(),
        }
    }

    /// Tells `pause` of a pause the server reports.
    pub fn pausing(mut self, pause: Pause) -> Heartbeat {
        self.pause = pause;
        self
    }

    /// Renews every `every` (`retry_after` after a failure) until `stop` fires or the lease
    /// is lost. An outage is logged once when it begins and once when it ends.
    pub fn start(self, stop: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let job = self.lease.job_id().to_string();
            let mut wait = self.config.every;
            let mut failing = false;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = self.lease.lost().cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                let beat = self.run_once().await;
                if matches!(beat, Beat::Renewed | Beat::CancelRequested)
                    && std::mem::take(&mut failing)
                {
                    tracing::info!(%job, "heartbeats reach the server again");
                }
                wait = self.config.every;
                match beat {
                    Beat::Renewed | Beat::CancelRequested => {}
                    Beat::Lost(error) => {
                        tracing::warn!(%job, %error, "the lease was taken back; stopping");
                        return;
                    }
                    Beat::Failed(error) => {
                        if std::mem::replace(&mut failing, true) {
                            tracing::debug!(%job, %error, "heartbeat failed again");
                        } else {
                            tracing::warn!(
                                %job,
                                %error,
                                "heartbeat failed; retrying while the lease lasts ({} s left)",
                                self.lease.remaining().as_secs()
                            );
                        }
                        wait = self.config.retry_after;
                    }
                }
            }
        })
    }

    /// One renewal, acted on: a cancel request or a refusal stops the run.
    pub async fn run_once(&self) -> Beat {
        match self.lease.renew(&self.client).await {
            Ok(job) if job.cancel_requested() => {
                self.cancel.cancel();
                Beat::CancelRequested
            }
            Ok(job) => {
                if let Some(pause) = &job.pause_requested {
                    self.pause.request(pause.immediate);
                }
                Beat::Renewed
            }
            Err(error) if error.status().is_some_and(|s| s.is_client_error()) => {
                self.lease.lost().cancel();
                self.cancel.cancel();
                Beat::Lost(error)
            }
            Err(error) => Beat::Failed(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use contract::Job;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::time::Instant;

    const TEST_JOB: &str = "0190a000-0000-7000-8000-0000000000c1";

    use super::*;

    /// A server that answers one request with `status` and `body`, over real HTTP.
    async fn answering(status: &'static str, body: String) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0; 4096];
            // Headers, then the small JSON body the heartbeat sends.
            while !request.windows(4).any(|w| w == b"\r\n\r\n") || !request.ends_with(b"}") {
                let n = conn.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(response.as_bytes()).await.unwrap();
        });
        url
    }

    fn heartbeat(url: &str) -> (Heartbeat, CancellationToken) {
        let client = QueueClient::new(url, "swu_test").unwrap();
        let lease = Lease::new(
            &TEST_JOB.parse().unwrap(),
            1,
            Duration::from_secs(60),
            Instant::now(),
        );
        let config = HeartbeatConfig::for_lease(&lease);
        let cancel = CancellationToken::new();
        (
            Heartbeat::new(client, lease, config, cancel.clone()),
            cancel,
        )
    }

    fn running(cancel_requested: bool) -> String {
        let at = serde_json::from_str(r#""2026-11-25T00:00:00Z""#).unwrap();
        let mut job = Job::queued(TEST_JOB.parse().unwrap(), serde_json::json!({}), at);
        job.cancel_requested_at = cancel_requested.then_some(at);
        serde_json::to_string(&job).unwrap()
    }

    #[tokio::test]
    async fn a_beat_renews_the_lease_and_lets_the_run_go_on() {
        let (beat, cancel) = heartbeat(&answering("200 OK", running(false)).await);
        assert!(matches!(beat.run_once().await, Beat::Renewed));
        assert!(!cancel.is_cancelled() && beat.lease.is_held());
    }

    #[tokio::test]
    async fn a_beat_that_brings_a_cancel_request_stops_the_run() {
        let (beat, cancel) = heartbeat(&answering("200 OK", running(true)).await);
        assert!(matches!(beat.run_once().await, Beat::CancelRequested));
        assert!(cancel.is_cancelled() && beat.lease.is_held());
    }

    #[tokio::test]
    async fn a_refused_beat_loses_the_lease_and_stops_the_run() {
        let refusal = r#"{"error":{"code":"not_owner","message":"w2 holds attempt 2"}}"#;
        let (beat, cancel) = heartbeat(&answering("409 Conflict", refusal.into()).await);
        assert!(matches!(beat.run_once().await, Beat::Lost(_)));
        assert!(cancel.is_cancelled() && !beat.lease.is_held());
    }

    #[tokio::test]
    async fn an_unreachable_server_fails_a_beat_but_keeps_the_lease() {
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let (beat, cancel) = heartbeat(&url);
        assert!(matches!(beat.run_once().await, Beat::Failed(_)));
        assert!(!cancel.is_cancelled() && beat.lease.is_held());
    }
}
