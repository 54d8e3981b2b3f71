//! A job's live timeline over SSE that survives dropped connections.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use contract::JobEvent;
use futures_util::Stream;
use futures_util::stream::{self, BoxStream};
use reqwest::header::{self, HeaderValue};
use reqwest::{Method, Response, Url};

use super::{ClientError, QueueClient, Result, SseMessage, SseParser};

/// The first wait before reconnecting; doubled after each failed try up to [`MAX_BACKOFF`],
/// back to this once an event arrives.
const MIN_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The events of one job: first those after the starting cursor, then live ones, for as
/// long as it is polled. Dropping it closes the connection.
///
/// When the connection breaks or the server ends it, the stream reconnects after a short
/// backoff (250 ms, doubling up to 5 s) and resumes from the last event it delivered by
/// sending `Last-Event-ID`, so no event is lost or repeated. Items that are errors are
/// reports, not the end: an unreachable server, a broken connection or a 5xx is yielded
/// and followed by a reconnect; an event that cannot be decoded is yielded and skipped.
/// The stream ends only after yielding an error that retrying cannot fix: the job does
/// not exist (404), the token is refused (401/403), or the answer is not an event stream.
pub struct EventStream {
    inner: BoxStream<'static, Result<JobEvent>>,
}

impl EventStream {
    /// `segments` locate the stream below `/api/queue`; each connect builds its URL on the
    /// server the client is using then, so a reconnect follows a failover.
    pub(super) fn new(client: QueueClient, segments: Vec<String>, after: Option<i64>) -> Self {
        let url = client.url(&segments.iter().map(String::as_str).collect::<Vec<_>>());
        let follow = Follow {
            client,
            segments,
            url,
            cursor: after,
            response: None,
            parser: SseParser::new(),
            queued: VecDeque::new(),
            delay: None,
            backoff: MIN_BACKOFF,
            server_retry: None,
            done: false,
        };
        EventStream {
            inner: Box::pin(stream::unfold(follow, Follow::next)),
        }
    }
}

impl Stream for EventStream {
    type Item = Result<JobEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventStream")
    }
}

struct Follow {
    client: QueueClient,
    segments: Vec<String>,
    /// Where the last connect went.
    url: Url,
    /// The id of the last event delivered: sent as `Last-Event-ID` on every (re)connect.
    cursor: Option<i64>,
    response: Option<Response>,
    parser: SseParser,
    /// Parsed, not yet delivered.
    queued: VecDeque<SseMessage>,
    /// How long to wait before the next connect, when the last one failed or ended.
    delay: Option<Duration>,
    backoff: Duration,
    /// A `retry:` the server sent: it never reconnects sooner than that.
    server_retry: Option<Duration>,
    done: bool,
}

impl Follow {
    async fn next(mut self) -> Option<(Result<JobEvent>, Follow)> {
        loop {
            if self.done {
                return None;
            }
            if let Some(message) = self.queued.pop_front() {
                match self.decode(message) {
                    Some(item) => return Some((item, self)),
                    None => continue,
                }
            }
            let Some(response) = self.response.as_mut() else {
                if let Some(delay) = self.delay.take() {
                    tokio::time::sleep(delay).await;
                }
                self.url = self
                    .client
                    .url(&self.segments.iter().map(String::as_str).collect::<Vec<_>>());
                match self.connect().await {
                    Ok(response) => {
                        self.response = Some(response);
                        self.parser = SseParser::new();
                    }
                    Err(error) => {
                        if error.is_retryable() {
                            self.retry_later();
                        } else {
                            self.done = true;
                        }
                        return Some((Err(error), self));
                    }
                }
                continue;
            };
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let messages = self.parser.push(&chunk);
                    self.queued.extend(messages);
                    if let Some(ms) = self.parser.retry_ms() {
                        self.server_retry = Some(Duration::from_millis(ms));
                    }
                }
                Ok(None) => {
                    tracing::debug!(url = %self.url, "event stream ended; reconnecting");
                    self.response = None;
                    self.retry_later();
                }
                Err(error) => {
                    self.response = None;
                    self.retry_later();
                    let error = self.client.transport(&self.url, error);
                    return Some((Err(error), self));
                }
            }
        }
    }

    async fn connect(&self) -> Result<Response> {
        let mut request = self
            .client
            .request(Method::GET, &self.url)
            .header(header::ACCEPT, "text/event-stream");
        if let Some(cursor) = self.cursor {
            request = request.header("last-event-id", HeaderValue::from(cursor));
        }
        let response = self.client.send(request, &self.url).await?;
        let is_sse = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            return Err(ClientError::Decode {
                url: self.url.to_string(),
                detail: "the answer is not a text/event-stream".to_string(),
            });
        }
        Ok(response)
    }

    fn retry_later(&mut self) {
        let floor = self.server_retry.unwrap_or(Duration::ZERO);
        self.delay = Some(self.backoff.max(floor));
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn decode(&mut self, message: SseMessage) -> Option<Result<JobEvent>> {
        if message.event.as_deref() == Some("error") {
            // The server's own failure notice; it closes the stream next and the
            // reconnect resumes from the cursor.
            tracing::debug!(url = %self.url, data = %message.data, "the server reported an event stream error");
            return None;
        }
        match serde_json::from_str::<JobEvent>(&message.data) {
            Ok(event) => {
                if self.cursor.is_some_and(|cursor| event.id <= cursor) {
                    return None;
                }
                self.cursor = Some(event.id);
                self.backoff = MIN_BACKOFF;
                Some(Ok(event))
            }
            Err(e) => {
                let id = message
                    .id
                    .as_deref()
                    .and_then(|id| id.trim().parse::<i64>().ok());
                if let Some(id) = id {
                    // Skip past it: asking again would only get the same unreadable event.
                    self.cursor = Some(self.cursor.map_or(id, |c| c.max(id)));
                }
                Some(Err(ClientError::Decode {
                    url: self.url.to_string(),
                    detail: format!(
                        "event {} is not a job event: {e}",
                        message.id.as_deref().unwrap_or("without id")
                    ),
                }
                .redacted(self.client.secret())))
            }
        }
    }
}
