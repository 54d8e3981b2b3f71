//! The typed client of the stepwise REST API (`/api/queue`, documented in the README):
//! what the worker loop and the `stepwise` CLI use to reach a server. HTTP only, speaking
//! the contract's wire types.
//!
//! The routes people use are here, what a job left (its events, artifacts, checkpoints)
//! in `left.rs`, the worker's in `worker_routes.rs`, the operator's course in `course.rs`,
//! schedules in `schedules.rs`, the servers' readiness in `health.rs`.

mod course;
mod error;
mod health;
mod left;
mod schedules;
mod sse;
mod stream;
mod worker_routes;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use contract::api::{CancelBody, JobList};
use contract::{Job, JobId, JobState};
use reqwest::header::{self, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, Url};
use serde::de::DeserializeOwned;

pub use error::ClientError;
pub use reqwest::StatusCode;
pub use sse::{SseMessage, SseParser};
pub use stream::EventStream;

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Only a connection that has gone silent trips this: it is longer than the server's SSE
/// keep-alive (15 s) and its longest claim long-poll (30 s), so neither a quiet event
/// stream nor a waiting claim times out, but a dead peer is noticed.
const READ_TIMEOUT: Duration = Duration::from_secs(90);

/// A client for one server, or for several replicas of it, acting as one token (a user's
/// or a worker's). Cheap to clone; clones share which server they are on.
///
/// With several servers it uses one until it cannot be reached, then the next: a request
/// whose connection was refused goes to the next server at once (it never reached the
/// first, so nothing is done twice); one that broke on the way fails, and the next request
/// starts on the next server.
#[derive(Clone)]
pub struct QueueClient {
    http: reqwest::Client,
    servers: Arc<Servers>,
    token: Token,
}

struct Servers {
    urls: Vec<Url>,
    /// The index of the server in use.
    current: AtomicUsize,
}

impl Servers {
    fn at(&self, index: usize) -> &Url {
        &self.urls[index % self.urls.len()]
    }

    fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed) % self.urls.len()
    }

    /// Moves on from `index`, unless another request already did.
    fn leave(&self, index: usize) {
        let next = (index + 1) % self.urls.len();
        let _ = self
            .current
            .compare_exchange(index, next, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The bearer token: sent in a header marked sensitive, never printed.
#[derive(Clone)]
struct Token {
    secret: Arc<str>,
    header: HeaderValue,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Debug for QueueClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueClient")
            .field(
                "servers",
                &self
                    .servers
                    .urls
                    .iter()
                    .map(Url::as_str)
                    .collect::<Vec<_>>(),
            )
            .field("token", &self.token)
            .finish()
    }
}

/// Replaces `secret` in `text`, so a server or proxy echoing the token back cannot make
/// it appear in an error.
pub(crate) fn redact(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        text.to_string()
    } else {
        text.replace(secret, "[redacted]")
    }
}

impl QueueClient {
    /// A client for the server at `base_url` (`http://127.0.0.1:3000`; a path prefix such
    /// as `https://host/stepwise` is kept). Fails on a URL that is not http(s) or a token
    /// that cannot be sent in a header.
    pub fn new(base_url: &str, token: &str) -> Result<Self> {
        Self::with_servers(&[base_url], token)
    }

    /// A client for several replicas of one server (on one database), tried in turn when
    /// one cannot be reached; the first is used first.
    pub fn with_servers(base_urls: &[&str], token: &str) -> Result<Self> {
        if base_urls.is_empty() {
            return Err(ClientError::Config(
                "no server URL given; pass one like http://127.0.0.1:3000".to_string(),
            ));
        }
        let urls = base_urls
            .iter()
            .map(|base_url| parse_base(base_url))
            .collect::<Result<Vec<_>>>()?;
        let secret = token.trim();
        if secret.is_empty() {
            return Err(ClientError::Config(
                "the API token is empty; pass --token or set STEPWISE_TOKEN (`stepwise serve` prints the first admin token; `stepwise token create` makes more)".to_string(),
            ));
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {secret}")).map_err(|_| {
            ClientError::Config(
                "the API token holds characters that cannot be sent in a header; copy it again exactly as it was printed".to_string(),
            )
        })?;
        header.set_sensitive(true);
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("stepwise/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Config(format!("cannot set up the HTTP client: {e}")))?;
        Ok(QueueClient {
            http,
            servers: Arc::new(Servers {
                urls,
                current: AtomicUsize::new(0),
            }),
            token: Token {
                secret: secret.into(),
                header,
            },
        })
    }

    /// The address of the server in use, as given (normalized by URL parsing).
    pub fn base_url(&self) -> &Url {
        self.servers.at(self.servers.current())
    }

    /// `POST /jobs`: submits a job request (the JSON envelope of the README) and returns
    /// the normalized job. An invalid request is an [`ClientError::Api`] 422 listing every
    /// field error.
    pub async fn create_job(&self, request: &serde_json::Value) -> Result<Job> {
        let url = self.url(&["jobs"]);
        let builder = self.request(Method::POST, &url).json(request);
        self.fetch(builder, &url).await
    }

    /// `GET /jobs`: newest first, filtered; returns a page and the cursor of the next.
    pub async fn list_jobs(
        &self,
        status: Option<JobState>,
        job_type: Option<&str>,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<(Vec<Job>, Option<String>)> {
        let url = self.url(&["jobs"]);
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(status) = status {
            query.push(("status", status.as_str().to_string()));
        }
        if let Some(job_type) = job_type {
            query.push(("type", job_type.to_string()));
        }
        if let Some(limit) = limit {
            query.push(("limit", limit.to_string()));
        }
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor.to_string()));
        }
        let builder = self.request(Method::GET, &url).query(&query);
        let page: JobList = self.fetch(builder, &url).await?;
        Ok((page.items, page.next_cursor))
    }

    /// `GET /jobs/{id}`.
    pub async fn get_job(&self, id: &JobId) -> Result<Job> {
        let url = self.job_url(id, &[]);
        self.fetch(self.request(Method::GET, &url), &url).await
    }

    /// `POST /jobs/{id}/cancel`: a queued job is cancelled at once; a running one is
    /// marked (`cancelRequestedAt`) until its worker acknowledges.
    pub async fn cancel_job(&self, id: &JobId, reason: Option<&str>) -> Result<Job> {
        let url = self.job_url(id, &["cancel"]);
        let body = CancelBody {
            reason: reason.map(str::to_string),
        };
        self.fetch(self.request(Method::POST, &url).json(&body), &url)
            .await
    }

    /// `{base}/api/queue/{segments…}` on the server in use, each segment percent-encoded,
    /// so an id holding `/` or `?` cannot reach another route.
    /// A job's route: `jobs/{id}` followed by `rest`.
    fn job_url(&self, id: &JobId, rest: &[&str]) -> Url {
        let id = id.to_string();
        let segments: Vec<&str> = ["jobs", id.as_str()].iter().chain(rest).copied().collect();
        self.url(&segments)
    }

    fn url(&self, segments: &[&str]) -> Url {
        self.url_on(self.servers.current(), segments)
    }

    fn url_on(&self, server: usize, segments: &[&str]) -> Url {
        let mut url = self.servers.at(server).clone();
        // `new` refused URLs that cannot be a base, so this always succeeds.
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(["api", "queue"])
                .extend(segments);
        }
        url
    }

    fn request(&self, method: Method, url: &Url) -> RequestBuilder {
        self.http
            .request(method, url.clone())
            .header(header::AUTHORIZATION, self.token.header.clone())
    }

    /// Sends and turns any non-2xx answer into the API's error. The request is built for
    /// the server in use; when that one refuses the connection, it is built again for the
    /// next (see [`QueueClient`]).
    async fn send(&self, builder: RequestBuilder, url: &Url) -> Result<Response> {
        let servers = &self.servers;
        let first = servers.current();
        let mut attempt = (first, builder, url.clone());
        let response = loop {
            let (server, builder, url) = attempt;
            let retry = builder.try_clone();
            match builder.send().await {
                Ok(response) => break response,
                Err(error) => {
                    if servers.urls.len() == 1 {
                        return Err(self.transport(&url, error));
                    }
                    servers.leave(server);
                    let next = (server + 1) % servers.urls.len();
                    let moved = self.moved(&url, server, next);
                    match (error.is_connect() && next != first, retry, moved) {
                        (true, Some(again), Some(moved)) => {
                            tracing::warn!(from = %servers.at(server), to = %servers.at(next), "the server cannot be reached; trying the next");
                            let again = again.build().map(|mut request| {
                                *request.url_mut() = moved.clone();
                                RequestBuilder::from_parts(self.http.clone(), request)
                            });
                            match again {
                                Ok(again) => attempt = (next, again, moved),
                                Err(_) => return Err(self.transport(&url, error)),
                            }
                        }
                        _ => return Err(self.transport(&url, error)),
                    }
                }
            }
        };
        let url = response.url().clone();
        let url = &url;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.bytes().await.map_err(|e| self.transport(url, e))?;
        Err(
            ClientError::from_response(status, &body, url.as_str(), location.as_deref())
                .redacted(&self.token.secret),
        )
    }

    async fn fetch<T: DeserializeOwned>(&self, builder: RequestBuilder, url: &Url) -> Result<T> {
        let response = self.send(builder, url).await?;
        let body = response.bytes().await.map_err(|e| self.transport(url, e))?;
        serde_json::from_slice(&body).map_err(|e| {
            ClientError::Decode {
                url: url.to_string(),
                detail: e.to_string(),
            }
            .redacted(&self.token.secret)
        })
    }

    fn transport(&self, url: &Url, error: reqwest::Error) -> ClientError {
        // reqwest repeats the URL in its own message; ours already names it.
        ClientError::Transport {
            url: url.to_string(),
            error: error.without_url(),
        }
    }

    fn secret(&self) -> &str {
        &self.token.secret
    }

    /// `url` (built on server `from`) on server `to` instead: the same path below the base.
    fn moved(&self, url: &Url, from: usize, to: usize) -> Option<Url> {
        let from = self.servers.at(from).as_str().trim_end_matches('/');
        let rest = url.as_str().strip_prefix(from)?;
        let to = self.servers.at(to).as_str().trim_end_matches('/');
        Url::parse(&format!("{to}{rest}")).ok()
    }
}

/// A server URL, checked: http(s) and able to carry a path.
fn parse_base(base_url: &str) -> Result<Url> {
    let base = Url::parse(base_url.trim()).map_err(|e| {
        ClientError::Config(format!(
            "the server URL `{base_url}` is not valid ({e}); pass one like http://127.0.0.1:3000"
        ))
    })?;
    if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
        return Err(ClientError::Config(format!(
            "the server URL `{base_url}` is not an http:// or https:// address; pass one like http://127.0.0.1:3000"
        )));
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use contract::api::ClaimBody;

    use super::*;

    const SECRET: &str = "swu_abcdefghijklmnopqrstuvwxyz0123456789";

    #[test]
    fn debug_output_never_shows_the_token() {
        let client = QueueClient::new("http://127.0.0.1:3000", SECRET).unwrap();
        let shown = format!("{client:?} {client:#?}");
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains("abcdefghij"), "{shown}");
        assert!(shown.contains("[redacted]"));
        assert!(shown.contains("127.0.0.1:3000"));
    }

    #[test]
    fn the_authorization_header_is_marked_sensitive() {
        let client = QueueClient::new("http://127.0.0.1:3000", SECRET).unwrap();
        let request = client
            .request(Method::GET, &client.url(&["jobs"]))
            .build()
            .unwrap();
        let value = &request.headers()[header::AUTHORIZATION];
        assert!(value.is_sensitive());
        assert!(!format!("{request:?}").contains(SECRET));
    }

    #[test]
    fn ids_are_path_segments_and_cannot_reach_another_route() {
        let client = QueueClient::new("https://queue.example/stepwise/", SECRET).unwrap();
        assert_eq!(
            client.url(&["jobs", "a/../b?c#d", "events"]).as_str(),
            "https://queue.example/stepwise/api/queue/jobs/a%2F..%2Fb%3Fc%23d/events"
        );
        let plain = QueueClient::new("http://127.0.0.1:3000", SECRET).unwrap();
        assert_eq!(
            plain.url(&["jobs", "claim"]).as_str(),
            "http://127.0.0.1:3000/api/queue/jobs/claim"
        );
    }

    #[test]
    fn a_bad_server_url_or_token_is_refused_with_what_to_pass_instead() {
        let error = QueueClient::new("127.0.0.1:3000", SECRET).unwrap_err();
        assert!(
            error.to_string().contains("http://127.0.0.1:3000"),
            "{error}"
        );
        let error = QueueClient::new("ftp://host", SECRET).unwrap_err();
        assert!(error.to_string().contains("http://"), "{error}");
        let error = QueueClient::new("http://127.0.0.1:3000", "  ").unwrap_err();
        assert!(error.to_string().contains("STEPWISE_TOKEN"), "{error}");
        let error = QueueClient::new("http://127.0.0.1:3000", "swu_a\nb").unwrap_err();
        assert!(!error.to_string().contains("swu_a"), "{error}");
    }

    #[tokio::test]
    async fn an_unreachable_server_names_its_url_and_what_to_check_without_the_token() {
        // Bind then drop: the port is (almost certainly) closed when the client connects.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let client = QueueClient::new(&format!("http://{addr}"), SECRET).unwrap();
        let id: JobId = "0190a000-0000-7000-8000-000000000001".parse().unwrap();
        let error = client.get_job(&id).await.unwrap_err();
        assert!(matches!(error, ClientError::Transport { .. }), "{error:?}");
        assert!(error.is_retryable());
        let shown = format!("{error} {error:?}");
        assert!(
            shown.contains(&format!("http://{addr}/api/queue/jobs/{id}")),
            "{shown}"
        );
        assert!(shown.contains("--server"), "{shown}");
        assert!(shown.contains("stepwise serve"), "{shown}");
        assert!(!shown.contains(SECRET), "{shown}");
    }

    #[test]
    fn claim_params_send_only_what_was_set_in_camel_case() {
        let params = ClaimBody {
            capabilities: Some(vec!["codex".into(), "git".into()]),
            lease_seconds: Some(60),
            wait_seconds: Some(2.5),
            ..ClaimBody::default()
        };
        assert_eq!(
            serde_json::to_value(&params).unwrap(),
            serde_json::json!({"capabilities": ["codex", "git"], "leaseSeconds": 60, "waitSeconds": 2.5})
        );
    }
}
