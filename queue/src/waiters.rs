//! Idle claimers (`Queue::claim_wait`) waiting for work, woken one per job that becomes
//! available instead of all at once.
//!
//! Waking every idle worker for each new job made all of them run a claim that only one
//! could win: with four idle workers, three empty claims per job, each a write transaction
//! on SQLite's single writer. Here the longest-waiting claimer is woken and carries a
//! baton: if it finds nothing it can take (the job needs a capability it lacks, or someone
//! else got there first), it hands the baton to the next waiter, at most once per waiter
//! that was waiting when the job arrived, so a job nobody here can run costs what the old
//! wake-everyone did and no more. A waiter that leaves holding a baton passes it on.
//!
//! Wake-ups are hints, as notifications are: every waiter still re-claims on its poll
//! interval, which covers whatever a baton cannot (a lost notification, a retry window
//! that simply elapses).
//!
//! A claimer that is parked (waiting, not claiming) can also be handed a job as it is
//! created on this replica ([`Waiters::reserve`]): the job is stored already leased to it,
//! in the one write that creates it, instead of being stored queued, announced, and then
//! claimed in a second write. That halves the commits between a submit and a worker
//! starting, which is most of that latency on PostgreSQL, where each commit waits for a
//! WAL flush. The longest-parked claimer whose request accepts the job gets it; a claimer
//! taken for a job waits for that job even past its deadline (a write's time at most).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use contract::Job;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::lease::ClaimRequest;
use crate::notify::{Notification, NotificationKind};

#[derive(Debug, Default, Clone)]
pub(crate) struct Waiters {
    list: Arc<Mutex<List>>,
}

#[derive(Debug, Default)]
struct List {
    /// Longest waiting first.
    queue: VecDeque<Arc<Slot>>,
}

#[derive(Debug, Default)]
struct Slot {
    notify: Notify,
    /// How many more waiters may be tried after this one, once it holds the baton.
    baton: Mutex<Option<usize>>,
    /// What the claimer may take; without one it is never handed a job.
    request: Option<Arc<ClaimRequest>>,
    /// While the claimer is parked: where a job handed to it goes.
    handoff: Mutex<Option<oneshot::Sender<Job>>>,
}

impl Slot {
    fn baton(&self) -> MutexGuard<'_, Option<usize>> {
        self.baton.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handoff(&self) -> MutexGuard<'_, Option<oneshot::Sender<Job>>> {
        self.handoff.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A parked claimer chosen for a job being created: the job is stored leased to it, then
/// delivered. Dropped undelivered (the write failed), the claimer simply claims again.
#[derive(Debug)]
pub(crate) struct Reservation {
    sender: oneshot::Sender<Job>,
    pub(crate) request: Arc<ClaimRequest>,
}

impl Reservation {
    /// Gives the stored job to the claimer; false if the claimer left meanwhile (its
    /// request was dropped: a client that hung up).
    pub(crate) fn deliver(self, job: Job) -> bool {
        self.sender.send(job).is_ok()
    }
}

impl List {
    /// Hands a baton worth `hops` further tries to the longest-waiting claimer.
    fn wake_one(&mut self, hops: usize) {
        if let Some(slot) = self.queue.pop_front() {
            *slot.baton() = Some(hops);
            slot.notify.notify_one();
        }
    }
}

impl Waiters {
    fn lock(&self) -> MutexGuard<'_, List> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the back of the line, with the request a handed job must satisfy (none: no
    /// handoffs). Join before the claim attempt that precedes the wait, so that a job
    /// arriving between that attempt and the wait is not missed.
    pub(crate) fn join(&self, request: Option<Arc<ClaimRequest>>) -> Ticket {
        let slot = Arc::new(Slot {
            request,
            ..Slot::default()
        });
        self.lock().queue.push_back(slot.clone());
        Ticket {
            list: self.list.clone(),
            slot,
        }
    }

    /// Takes the longest-parked claimer whose request `accepts` a new job out of the line,
    /// for that job to be handed to it.
    pub(crate) fn reserve(&self, accepts: impl Fn(&ClaimRequest) -> bool) -> Option<Reservation> {
        let mut list = self.lock();
        for at in 0..list.queue.len() {
            let slot = &list.queue[at];
            let Some(request) = slot.request.clone().filter(|r| accepts(r)) else {
                continue;
            };
            let mut handoff = slot.handoff();
            let Some(sender) = handoff.take_if(|s| !s.is_closed()) else {
                continue;
            };
            drop(handoff);
            list.queue.remove(at);
            return Some(Reservation { sender, request });
        }
        None
    }

    /// One job became available: wake the longest-waiting claimer.
    pub(crate) fn wake_one(&self) {
        let mut list = self.lock();
        let hops = list.queue.len().saturating_sub(1);
        list.wake_one(hops);
    }

    /// Something may have been missed (a lagging subscription): everyone looks.
    pub(crate) fn wake_all(&self) {
        let mut list = self.lock();
        while !list.queue.is_empty() {
            list.wake_one(0);
        }
    }

    /// Wakes claimers as jobs become available, until `stop`.
    pub(crate) fn follow(
        self,
        mut notes: broadcast::Receiver<Notification>,
        stop: CancellationToken,
    ) {
        tokio::spawn(async move {
            loop {
                let note = tokio::select! {
                    _ = stop.cancelled() => return,
                    note = notes.recv() => note,
                };
                match note {
                    Ok(note) if note.kind == NotificationKind::JobAvailable => self.wake_one(),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.wake_all(),
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().queue.len()
    }
}

/// A claimer's place in line. Dropping it leaves the line, passing on a baton it held.
#[derive(Debug)]
pub(crate) struct Ticket {
    list: Arc<Mutex<List>>,
    slot: Arc<Slot>,
}

impl Ticket {
    /// Resolves once this claimer holds a baton.
    pub(crate) async fn woken(&self) {
        loop {
            if self.slot.baton().is_some() {
                return;
            }
            self.slot.notify.notified().await;
        }
    }

    /// Waits up to `nap` for a baton, or for a job handed straight to this claimer, which
    /// it returns. `None`: claim again.
    pub(crate) async fn park(&self, nap: Duration) -> Option<Job> {
        let (sender, mut receiver) = oneshot::channel();
        *self.slot.handoff() = Some(sender);
        let mut answered = None;
        let _ = tokio::time::timeout(nap, async {
            tokio::select! {
                handed = &mut receiver => answered = Some(handed.ok()),
                () = self.woken() => {}
            }
        })
        .await;
        if let Some(handed) = answered {
            return handed;
        }
        // Awake: take no more handoffs, unless a job is already on its way here.
        if self.slot.handoff().take().is_some() {
            return None;
        }
        receiver.await.ok()
    }

    /// After a claim attempt: the baton, if one was held, is spent on a job claimed, or
    /// handed on when nothing was claimed. Either way the claimer is back in line.
    pub(crate) fn claimed(&self, anything: bool) {
        let held = self.slot.baton().take();
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        if !list.queue.iter().any(|s| Arc::ptr_eq(s, &self.slot)) {
            list.queue.push_back(self.slot.clone());
        }
        if let Some(hops) = held.filter(|hops| !anything && *hops > 0) {
            list.wake_one(hops - 1);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let held = self.slot.baton().take();
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.queue.retain(|s| !Arc::ptr_eq(s, &self.slot));
        if let Some(hops) = held {
            // Leaving with the job's wake-up unspent: the next in line gets it, with the
            // same number of tries left, since this waiter never tried.
            list.wake_one(hops);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn is_woken(ticket: &Ticket) -> bool {
        tokio::time::timeout(Duration::from_millis(20), ticket.woken())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn one_job_wakes_one_waiter_the_longest_waiting() {
        let waiters = Waiters::default();
        let first = waiters.join(None);
        let second = waiters.join(None);
        waiters.wake_one();
        assert!(is_woken(&first).await);
        assert!(!is_woken(&second).await);
    }

    #[tokio::test]
    async fn a_waiter_that_claims_nothing_hands_the_baton_on_once_per_waiter() {
        let waiters = Waiters::default();
        let tickets: Vec<Ticket> = (0..3).map(|_| waiters.join(None)).collect();
        waiters.wake_one();
        // Each finds nothing it can take: the baton goes down the line, then stops.
        for ticket in &tickets {
            assert!(is_woken(ticket).await);
            ticket.claimed(false);
        }
        for ticket in &tickets {
            assert!(!is_woken(ticket).await, "the baton went round twice");
        }
        assert_eq!(waiters.len(), 3);
    }

    #[tokio::test]
    async fn a_claimed_job_spends_the_baton() {
        let waiters = Waiters::default();
        let first = waiters.join(None);
        let second = waiters.join(None);
        waiters.wake_one();
        assert!(is_woken(&first).await);
        first.claimed(true);
        assert!(!is_woken(&second).await);
        assert!(!is_woken(&first).await);
    }

    #[tokio::test]
    async fn a_waiter_leaving_with_the_baton_passes_it_on() {
        let waiters = Waiters::default();
        let first = waiters.join(None);
        let second = waiters.join(None);
        waiters.wake_one();
        drop(first);
        assert!(is_woken(&second).await);
        assert_eq!(waiters.len(), 0);
    }

    fn claimer(worker: &str, capabilities: &[&str]) -> Option<Arc<ClaimRequest>> {
        Some(Arc::new(ClaimRequest {
            worker_id: worker.into(),
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
            allowed_types: None,
            allowed_repositories: None,
            lease: Duration::from_secs(30),
            max_running_per_repository: None,
        }))
    }

    fn wants(capability: &'static str) -> impl Fn(&ClaimRequest) -> bool {
        move |r| r.capabilities.iter().any(|c| c == capability)
    }

    fn job(id: &str) -> Job {
        serde_json::from_value(serde_json::json!({
            "id": id, "type": "task", "status": "running", "priority": 0, "payload": {},
            "requiredCapabilities": [], "attempt": 1, "maxAttempts": 3,
            "nextAttemptAt": "2026-01-01T00:00:00Z", "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn only_a_parked_claimer_that_accepts_the_job_is_reserved_the_longest_parked_first() {
        let waiters = Waiters::default();
        let busy = waiters.join(claimer("busy", &["codex"]));
        let git_only = waiters.join(claimer("git-only", &["git"]));
        let first = waiters.join(claimer("first", &["codex"]));
        let second = waiters.join(claimer("second", &["codex"]));
        let parked: Vec<_> = [&git_only, &first, &second]
            .into_iter()
            .map(|t| Box::pin(t.park(Duration::from_secs(30))))
            .collect();
        let mut parked: Vec<_> = parked.into_iter().map(Some).collect();
        // Let each park register its handoff.
        for p in parked.iter_mut().flatten() {
            let _ = tokio::time::timeout(Duration::from_millis(5), p.as_mut()).await;
        }
        let taken = waiters
            .reserve(wants("codex"))
            .expect("a parked codex claimer");
        assert_eq!(
            taken.request.worker_id, "first",
            "busy never parked; git-only refuses"
        );
        assert_eq!(waiters.len(), 3, "the reserved claimer left the line");
        let j1 = "0190a000-0000-7000-8000-000000000001";
        assert!(taken.deliver(job(j1)));
        let handed = parked[1].take().unwrap().await;
        assert_eq!(handed.map(|j| j.id.to_string()).as_deref(), Some(j1));
        drop(busy);
    }

    #[tokio::test]
    async fn a_claimer_that_wakes_stops_taking_handoffs_and_one_that_left_takes_none() {
        let waiters = Waiters::default();
        let ticket = waiters.join(claimer("w", &["codex"]));
        assert_eq!(ticket.park(Duration::from_millis(10)).await, None);
        assert!(
            waiters.reserve(wants("codex")).is_none(),
            "awake: not parked any more"
        );
        {
            let mut parking = Box::pin(ticket.park(Duration::from_secs(30)));
            let _ = tokio::time::timeout(Duration::from_millis(5), parking.as_mut()).await;
        }
        // The parked future was dropped (its client hung up): nothing to hand to.
        assert!(waiters.reserve(wants("codex")).is_none());
    }

    #[tokio::test]
    async fn a_reservation_dropped_undelivered_sends_the_claimer_back_to_claim() {
        let waiters = Waiters::default();
        let ticket = waiters.join(claimer("w", &["codex"]));
        let mut parking = Box::pin(ticket.park(Duration::from_secs(30)));
        let _ = tokio::time::timeout(Duration::from_millis(5), parking.as_mut()).await;
        let taken = waiters.reserve(wants("codex")).unwrap();
        drop(taken);
        let answer = tokio::time::timeout(Duration::from_secs(1), parking).await;
        assert_eq!(answer.expect("the claimer stopped waiting"), None);
        // Back in line after its next claim attempt.
        ticket.claimed(false);
        assert_eq!(waiters.len(), 1);
    }

    #[tokio::test]
    async fn a_missed_notification_wakes_everyone() {
        let waiters = Waiters::default();
        let tickets: Vec<Ticket> = (0..3).map(|_| waiters.join(None)).collect();
        waiters.wake_all();
        for ticket in &tickets {
            assert!(is_woken(ticket).await);
        }
    }
}
