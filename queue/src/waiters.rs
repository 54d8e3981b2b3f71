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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

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
}

impl Slot {
    fn baton(&self) -> MutexGuard<'_, Option<usize>> {
        self.baton.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Joins the back of the line. Join before the claim attempt that precedes the wait,
    /// so that a job arriving between that attempt and the wait is not missed.
    pub(crate) fn join(&self) -> Ticket {
        let slot = Arc::new(Slot::default());
        self.lock().queue.push_back(slot.clone());
        Ticket {
            list: self.list.clone(),
            slot,
        }
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
        let first = waiters.join();
        let second = waiters.join();
        waiters.wake_one();
        assert!(is_woken(&first).await);
        assert!(!is_woken(&second).await);
    }

    #[tokio::test]
    async fn a_waiter_that_claims_nothing_hands_the_baton_on_once_per_waiter() {
        let waiters = Waiters::default();
        let tickets: Vec<Ticket> = (0..3).map(|_| waiters.join()).collect();
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
        let first = waiters.join();
        let second = waiters.join();
        waiters.wake_one();
        assert!(is_woken(&first).await);
        first.claimed(true);
        assert!(!is_woken(&second).await);
        assert!(!is_woken(&first).await);
    }

    #[tokio::test]
    async fn a_waiter_leaving_with_the_baton_passes_it_on() {
        let waiters = Waiters::default();
        let first = waiters.join();
        let second = waiters.join();
        waiters.wake_one();
        drop(first);
        assert!(is_woken(&second).await);
        assert_eq!(waiters.len(), 0);
    }

    #[tokio::test]
    async fn a_missed_notification_wakes_everyone() {
        let waiters = Waiters::default();
        let tickets: Vec<Ticket> = (0..3).map(|_| waiters.join()).collect();
        waiters.wake_all();
        for ticket in &tickets {
            assert!(is_woken(ticket).await);
        }
    }
}
