//! Subscriptions to task resources, `stepwise://tasks/{id}`: a watcher per job sends
//! `notifications/resources/updated` whenever the job's state or steps change, until the
//! client unsubscribes, goes away, or the job ends. Clients up to 2025-11-25 ask with
//! `resources/subscribe`; 2026-07-28 clients with `subscriptions/listen`, whose stream
//! carries the updates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use contract::JobId;
use contract::api::resources::TASKS_URI;
use contract::job::task;
use futures_util::StreamExt;
use queue::NotificationKind;
use rmcp::model::{ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::desk::Desk;

/// How often a watcher waiting for a change checks that its client is still there.
const CHECK_CLIENT: Duration = Duration::from_secs(15);

/// The watchers of one MCP session, by URI.
#[derive(Clone, Default)]
pub struct Subscriptions(Arc<Mutex<HashMap<String, CancellationToken>>>);

impl Subscriptions {
    /// Watches `id` for the client behind `peer`, in place of an earlier watch of `uri`.
    pub fn start(&self, desk: Desk, id: JobId, uri: String, peer: Peer<RoleServer>) {
        let stop = CancellationToken::new();
        if let Some(old) = self.lock().insert(uri.clone(), stop.clone()) {
            old.cancel();
        }
        tokio::spawn(async move {
            let notify = Notify::Session(peer.clone(), uri);
            // A client that went away without unsubscribing is noticed at its next update,
            // or by this check while nothing changes.
            let gone = async {
                let mut tick = tokio::time::interval(CHECK_CLIENT);
                loop {
                    tick.tick().await;
                    if peer.is_transport_closed() {
                        return;
                    }
                }
            };
            tokio::select! {
                () = stop.cancelled() => {}
                () = gone => {}
                () = watch(&desk, &id, &notify) => {}
            }
        });
    }

    pub fn stop(&self, uri: &str) {
        if let Some(stop) = self.lock().remove(uri) {
            stop.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The job a task resource URI names; only a task itself can be subscribed to.
pub fn task_of(uri: &str) -> Result<JobId, ErrorData> {
    uri.strip_prefix(TASKS_URI)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("only a task can be subscribed to: {TASKS_URI}/{{id}}, not {uri}"),
                None,
            )
        })
}

/// How a watcher tells its client of a change of a task resource.
enum Notify {
    /// A notification on the session of a `resources/subscribe`.
    Session(Peer<RoleServer>, String),
    /// A notification on a `subscriptions/listen` stream.
    Stream(SubscriptionSink, String),
}

impl Notify {
    /// Whether the client could be told.
    async fn send(&self) -> bool {
        match self {
            Notify::Session(peer, uri) => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone()))
                .await
                .is_ok(),
            Notify::Stream(sink, uri) => sink.notify_resource_updated(uri.clone()).await.is_ok(),
        }
    }
}

/// Tells the client at each change of the job until it has ended, or the client can no
/// longer be reached.
async fn watch(desk: &Desk, id: &JobId, notify: &Notify) {
    let ended = || async {
        desk.job(id)
            .await
            .map_or(true, |job| job.status.is_terminal())
    };
    if ended().await {
        return;
    }
    match desk {
        Desk::Local { state, .. } => {
            let mut notes = state.queue.subscribe();
            loop {
                let changed = match notes.recv().await {
                    Ok(note) => {
                        note.job_id == *id
                            && matches!(
                                note.kind,
                                NotificationKind::JobChanged | NotificationKind::StepProgress
                            )
                    }
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => return,
                };
                if changed && (!notify.send().await || ended().await) {
                    return;
                }
            }
        }
        Desk::Remote(client) => {
            // From the latest event that tells progress: what came before is known.
            let after = desk
                .progress_events(id)
                .await
                .ok()
                .and_then(|events| events.last().map(|e| e.id));
            let mut events = client.stream_events(id, after);
            while let Some(event) = events.next().await {
                let Ok(event) = event else { return };
                if event.kind == task::STEP_LOG {
                    continue;
                }
                if !notify.send().await || ended().await {
                    return;
                }
            }
        }
    }
}

/// How many tasks one `subscriptions/listen` stream may watch: each is a watcher.
const MAX_LISTENED: usize = 100;

/// The part of a `subscriptions/listen` filter this server honours: updates of task
/// resources, each once, up to [`MAX_LISTENED`]. Whether the caller may read each task is
/// checked when the stream opens.
pub fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut seen = std::collections::HashSet::new();
    let tasks: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|uri| task_of(uri).is_ok() && seen.insert(uri.as_str()))
        .take(MAX_LISTENED)
        .cloned()
        .collect();
    SubscriptionFilter::builder()
        .resource_subscriptions(tasks)
        .build()
}

/// Serves one `subscriptions/listen` stream: an update on it at each change of every
/// task it names that the caller may read, until the client closes it. A task that
/// cannot be read (unknown, or not the caller's to read) is never reported on.
pub async fn listen(desk: Desk, subscription: SubscriptionContext) {
    let uris = subscription
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let sink = subscription.sink().clone();
    let watches = uris.into_iter().map(|uri| {
        let (desk, sink) = (&desk, &sink);
        async move {
            let Ok(id) = task_of(&uri) else { return };
            // The caller must be able to read it, and it must exist.
            if desk.job(&id).await.is_err() {
                return;
            }
            watch(desk, &id, &Notify::Stream(sink.clone(), uri)).await;
        }
    });
    let all = async {
        futures_util::future::join_all(watches).await;
        // Every job named has ended: the stream stays open until the client closes it.
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = subscription.cancelled() => {}
        () = all => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_stream_watches_each_task_once_and_a_bounded_number_of_them() {
        let task = |n: u32| format!("{TASKS_URI}/0190a000-0000-7000-8000-{n:012}");
        let mut uris: Vec<String> = (0..300).map(task).collect();
        uris.insert(1, task(0));
        uris.insert(2, format!("{TASKS_URI}?status=running"));
        let requested = SubscriptionFilter::builder()
            .resource_subscriptions(uris)
            .build();
        let accepted = accepted(&requested).resource_subscriptions.unwrap();
        assert_eq!(accepted.len(), MAX_LISTENED);
        assert_eq!(accepted[..2], [task(0), task(1)]);
    }
}
