//! Following a job's timeline live. However many watch one job on this replica, one reader
//! task reads its new events from the store once and hands them to every watcher. Before,
//! each watcher read the store again for every event: with 1,000 browser tabs on a job
//! that is 1,000 reads per log line, and the last tab heard of it 0.6 s late.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use contract::{JobEvent, JobId};
use tokio::sync::broadcast::{self, error::RecvError};

use super::{Inner, Queue};
use crate::error::QueueError;
use crate::notify::{Notification, NotificationKind};

/// Events read in one go, catching up or following.
const PAGE: u32 = 500;

/// Batches a watcher may fall behind by; one that falls further reads the store itself
/// until it has caught up again.
const BACKLOG: usize = 256;

/// A job's reader reads the store at least this often, notification or not:
/// notifications are hints that can be lost (another replica's are relayed after its
/// commit), and the store is the truth.
const RECHECK: Duration = Duration::from_secs(5);

/// New events of one job, oldest first, as its reader read them.
type Batch = Arc<Vec<JobEvent>>;

/// The job readers running on this replica, by job.
#[derive(Default)]
pub(super) struct Readers(Mutex<HashMap<JobId, broadcast::Sender<Batch>>>);

impl Readers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, broadcast::Sender<Batch>>> {
        // The map stays whole whatever panicked while holding it: each step is one call.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One watcher's place in a job's timeline: [`Queue::follow_events`].
pub struct EventFollower {
    queue: Queue,
    job_id: JobId,
    after: i64,
    live: broadcast::Receiver<Batch>,
    caught_up: bool,
}

impl Queue {
    /// Follows the job's timeline after event `after` (0: from the start): the watcher
    /// reads the store itself until it has caught up, then takes what the job's one reader
    /// on this replica hands on.
    pub async fn follow_events(&self, id: &JobId, after: i64) -> Result<EventFollower, QueueError> {
        Ok(EventFollower {
            queue: self.clone(),
            job_id: *id,
            after,
            live: self.job_reader(id).await?,
            caught_up: false,
        })
    }

    /// A receiver of the job's reader, started if none runs. Every event the reader never
    /// hands on is in the store before any watcher subscribes to it: the reader starts
    /// after the job's newest event, read before it is published, and it subscribes to
    /// notifications before that read, so it misses no later one.
    async fn job_reader(&self, id: &JobId) -> Result<broadcast::Receiver<Batch>, QueueError> {
        if let Some(sender) = self.inner.readers.lock().get(id) {
            return Ok(sender.subscribe());
        }
        let notes = self.subscribe();
        let start = self
            .list_latest_events(id, 1)
            .await?
            .last()
            .map_or(0, |e| e.id);
        let mut readers = self.inner.readers.lock();
        if let Some(sender) = readers.get(id) {
            return Ok(sender.subscribe());
        }
        let (sender, live) = broadcast::channel(BACKLOG);
        readers.insert(*id, sender.clone());
        drop(readers);
        tokio::spawn(read_job(
            Arc::downgrade(&self.inner),
            *id,
            sender,
            notes,
            start,
        ));
        Ok(live)
    }
}

impl EventFollower {
    /// The next events after those it returned, oldest first; waits for them once caught
    /// up. An error is the store's: the watcher should say so and stop.
    pub async fn next(&mut self) -> Result<Vec<JobEvent>, QueueError> {
        loop {
            if !self.caught_up {
                let page = self
                    .queue
                    .list_events(&self.job_id, self.after, PAGE)
                    .await?;
                match page.last() {
                    Some(last) => {
                        self.after = last.id;
                        return Ok(page);
                    }
                    None => self.caught_up = true,
                }
                continue;
            }
            match self.live.recv().await {
                Ok(batch) => {
                    // The reader may hand on what this watcher already read for itself.
                    let fresh: Vec<JobEvent> = batch
                        .iter()
                        .filter(|e| e.id > self.after)
                        .cloned()
                        .collect();
                    if let Some(last) = fresh.last() {
                        self.after = last.id;
                        return Ok(fresh);
                    }
                }
                Err(RecvError::Lagged(_)) => self.caught_up = false,
                Err(RecvError::Closed) => {
                    self.live = self.queue.job_reader(&self.job_id).await?;
                    self.caught_up = false;
                }
            }
        }
    }
}

/// The reader of one job: after each notification about it (or [`RECHECK`]), reads its
/// events after `after` and hands them on, until no watcher is left or the queue is gone.
async fn read_job(
    queue: Weak<Inner>,
    id: JobId,
    sender: broadcast::Sender<Batch>,
    mut notes: broadcast::Receiver<Notification>,
    mut after: i64,
) {
    loop {
        let open = tokio::time::timeout(RECHECK, changed(&mut notes, &id))
            .await
            .unwrap_or(true);
        let Some(inner) = queue.upgrade() else { return };
        let queue = Queue { inner };
        if !open || sender.receiver_count() == 0 {
            // Watchers subscribe under this lock, so none can join a reader that is leaving.
            let mut readers = queue.inner.readers.lock();
            if !open || sender.receiver_count() == 0 {
                readers.remove(&id);
                return;
            }
        }
        loop {
            match queue.list_events(&id, after, PAGE).await {
                Ok(page) => {
                    let Some(last) = page.last() else { break };
                    after = last.id;
                    let full = page.len() == PAGE as usize;
                    // An error only means every watcher left meanwhile; the next wake ends.
                    let _ = sender.send(Arc::new(page));
                    if !full {
                        break;
                    }
                }
                Err(error) => {
                    // Read again at the next wake; the watchers wait meanwhile.
                    tracing::warn!(job_id = %id, %error, "reading a followed job's events failed");
                    break;
                }
            }
        }
    }
}

/// Waits for a notification that the job has new events: `false` once the notifier is
/// gone. Missed notifications count as news.
async fn changed(notes: &mut broadcast::Receiver<Notification>, id: &JobId) -> bool {
    loop {
        match notes.recv().await {
            Ok(note)
                if note.job_id == *id
                    && matches!(
                        note.kind,
                        NotificationKind::EventAppended { .. } | NotificationKind::JobChanged
                    ) =>
            {
                return true;
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return true,
            Err(RecvError::Closed) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClaimRequest, Database, Fence, QueueConfig};
    use contract::NewEvent;

    #[tokio::test]
    async fn watchers_of_one_job_share_one_reader_that_leaves_with_the_last_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_data_dir(dir.path()).await.unwrap();
        let queue = Queue::open(db, QueueConfig::new(dir.path().join("artifacts")))
            .await
            .unwrap();
        queue.migrate().await.unwrap();
        let request = serde_json::json!({ "payload": { "repository": "octo/hello",
            "task": { "instructions": "follow me", "publish": { "mode": "none" } } } });
        let job = queue.create_job(&request, None).await.unwrap();
        let claim = ClaimRequest {
            worker_id: "w1".into(),
            capabilities: vec!["codex".into(), "git".into()],
            allowed_types: None,
            allowed_repositories: None,
            lease: Duration::from_secs(60),
            max_running_per_repository: None,
        };
        let claimed = queue.claim(&claim).await.unwrap().expect("the job");
        let fence = Fence::of(&claimed).unwrap();

        let mut watchers = Vec::new();
        for _ in 0..5 {
            watchers.push(queue.follow_events(&job.id, 0).await.unwrap());
        }
        assert_eq!(queue.inner.readers.lock().len(), 1);
        let note = || NewEvent {
            kind: "task.note".into(),
            level: contract::EventLevel::Info,
            message: "hello".into(),
            payload: Default::default(),
        };
        queue.append_event(&job.id, &fence, note()).await.unwrap();
        for watcher in &mut watchers {
            let mut seen = Vec::new();
            while seen.len() < 3 {
                let events = tokio::time::timeout(Duration::from_secs(10), watcher.next())
                    .await
                    .expect("every event reaches every watcher")
                    .unwrap();
                seen.extend(events);
            }
            assert_eq!(seen[2].kind, "task.note");
        }

        drop(watchers);
        // The reader leaves at its next wake once nobody watches.
        queue.append_event(&job.id, &fence, note()).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !queue.inner.readers.lock().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the reader never left"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
