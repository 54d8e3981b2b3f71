//! Subscriptions to a task resource: `resources/subscribe` on `stepwise://tasks/{id}`
//! starts a watcher that sends `notifications/resources/updated` whenever the job's state
//! or steps change, until the client unsubscribes, goes away, or the job ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use contract::JobId;
use contract::api::resources::TASKS_URI;
use contract::job::task;
use futures_util::StreamExt;
use queue::NotificationKind;
use rmcp::model::ResourceUpdatedNotificationParam;
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
            tokio::select! {
                () = stop.cancelled() => {}
                () = watch(&desk, &id, &uri, &peer) => {}
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

/// Sends an update for each change of the job until it has ended or the client is gone.
async fn watch(desk: &Desk, id: &JobId, uri: &str, peer: &Peer<RoleServer>) {
    let notify = || async {
        let sent = peer
            .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.to_string()))
            .await;
        sent.is_ok()
    };
    let ended = || async {
        desk.job(id)
            .await
            .map_or(true, |job| job.status.is_terminal())
    };
    if ended().await {
        return;
    }
    // A client that went away without unsubscribing is noticed at its next update, or
    // by the periodic check while nothing changes.
    let gone = async {
        let mut tick = tokio::time::interval(CHECK_CLIENT);
        loop {
            tick.tick().await;
            if peer.is_transport_closed() {
                return;
            }
        }
    };
    let changes = async {
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
                    if changed && (!notify().await || ended().await) {
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
                    if !notify().await || ended().await {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = gone => {}
        () = changes => {}
    }
}
