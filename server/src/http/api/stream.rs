//! Server-Sent Events, fed by the queue's notifications:
//! - `GET /jobs/{id}/events/stream`: one job's timeline, replayed from `Last-Event-ID` (or
//!   `?after=`) and then pushed live;
//! - `GET /jobs/stream`: which jobs changed, for a live jobs list.

use std::convert::Infallible;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use contract::api::jobs::{JobChange, JobChangeKind};
use contract::{JobEvent, JobId};
use futures_util::StreamExt;
use futures_util::stream::{self, Stream};
use queue::{EventFollower, NotificationKind};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use super::extract::{ApiQuery, JobPath};
use crate::http::auth::{Reader, User};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use contract::api::ErrorBody;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/jobs/{id}/events/stream", get(stream_events))
        .route("/jobs/stream", get(stream_jobs))
}

/// Named SSE events of `GET /jobs/stream`: a job changed, or the stream missed some
/// changes and the client should read the list again.
const JOB_EVENT: &str = "job";
const RESYNC_EVENT: &str = "resync";

#[utoipa::path(get, path = "/api/queue/jobs/stream", tag = "jobs",
    responses((status = 200, description = "Server-Sent Events, one per change from now on: `job` with a JobChange (`what`: `changed` for its state, lease or cancel request; `progress` for its steps), or `resync` when some were missed and the list should be read again. Nothing is replayed: read the list first, then follow.", content_type = "text/event-stream", body = JobChange),
        (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "a worker token", body = ErrorBody)))]
pub(crate) async fn stream_jobs(
    State(state): State<AppState>,
    _user: User,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let notes = state.queue.subscribe();
    let changes = stream::unfold(notes, |mut notes| async move {
        loop {
            let change = match notes.recv().await {
                Ok(note) => JobChange {
                    job_id: note.job_id,
                    what: match note.kind {
                        NotificationKind::JobChanged => JobChangeKind::Changed,
                        NotificationKind::StepProgress => JobChangeKind::Progress,
                        _ => continue,
                    },
                },
                Err(RecvError::Lagged(_)) => {
                    let event = Event::default().event(RESYNC_EVENT).data("{}");
                    return Some((Ok(event), notes));
                }
                Err(RecvError::Closed) => return None,
            };
            let data = serde_json::to_string(&change).unwrap_or_else(|_| "{}".into());
            return Some((Ok(Event::default().event(JOB_EVENT).data(data)), notes));
        }
    });
    // Counted open for as long as the stream lives.
    let open = state.metrics.stream_opened("jobs");
    let changes = changes
        .take_until(state.closing.clone().cancelled_owned())
        .map(move |event| {
            let _ = &open;
            event
        });
    Sse::new(changes).keep_alive(KeepAlive::new().interval(state.limits.keep_alive))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct StreamQuery {
    after: Option<i64>,
}

#[utoipa::path(get, path = "/api/queue/jobs/{id}/events/stream", tag = "jobs",
    params(("id" = String, Path), ("Last-Event-ID" = Option<i64>, Header, description = "resume after this event id"), StreamQuery),
    responses((status = 200, description = "Server-Sent Events: `id` is the event id, `event` its kind, `data` the JobEvent JSON", content_type = "text/event-stream", body = String),
        (status = 404, body = ErrorBody), (status = 401, description = "no valid token", body = ErrorBody), (status = 403, description = "the token may not do this", body = ErrorBody)))]
async fn stream_events(
    State(state): State<AppState>,
    reader: Reader,
    JobPath(id): JobPath,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    reader.check_holds(&state.queue.get_job(&id).await?)?;
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(query.after)
        .unwrap_or(0);
    let tail = EventFeed {
        follower: state.queue.follow_events(&id, after).await?,
        job_id: id,
        pending: Vec::new(),
        done: false,
    };
    let open = state.metrics.stream_opened("job");
    let events = stream::unfold(tail, EventFeed::next)
        .take_until(state.closing.clone().cancelled_owned())
        .map(move |event| {
            let _ = &open;
            event
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(state.limits.keep_alive)))
}

/// The state of one stream: where it is in the timeline (the queue's follower, which
/// shares one reader of the job with every other stream of it) and what it still has to
/// send.
struct EventFeed {
    follower: EventFollower,
    job_id: JobId,
    /// Read, not yet sent; oldest last (popped from the end).
    pending: Vec<JobEvent>,
    done: bool,
}

impl EventFeed {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, EventFeed)> {
        if let Some(event) = self.pending.pop() {
            return Some((Ok(to_sse(&event)), self));
        }
        if self.done {
            return None;
        }
        match self.follower.next().await {
            Ok(events) => {
                self.pending = events.into_iter().rev().collect();
                let event = self.pending.pop()?;
                Some((Ok(to_sse(&event)), self))
            }
            Err(e) => {
                tracing::warn!(job_id = %self.job_id, error = %e, "event stream read failed");
                self.done = true;
                let event = Event::default()
                    .event("error")
                    .data("the event stream failed; reconnect to resume");
                Some((Ok(event), self))
            }
        }
    }
}

/// One SSE message: `id` is the event id (the resume cursor), `event` its kind.
fn to_sse(event: &JobEvent) -> Event {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".to_string());
    Event::default()
        .id(event.id.to_string())
        .event(&event.kind)
        .data(data)
}
