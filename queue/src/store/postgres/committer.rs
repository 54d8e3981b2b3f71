//! PostgreSQL's group committer. Concurrent writes of one kind share statements: while
//! [`IN_FLIGHT`] statements of the kind run, new writes wait in line, and the next
//! statement carries the whole line, so its writes share one round trip, one commit and one
//! WAL flush. The busier the queue, the more each statement carries; a write that finds a
//! statement free goes out at once, on its own caller's task, so an idle queue pays nothing.
//! Each writer gets its own answer once the statement that carried its write committed.
//!
//! A batch runs on a task of its own: a writer that stops waiting (a client that hung up)
//! takes nobody else's write down with it.
//!
//! A line keeps the connections its statements ran on for its next statements
//! (`lent.rs`), instead of giving each back to the pool.
//!
//! A gathering line ([`Committer::gathering`]) also waits, briefly, for the writers it has
//! just answered, when they come straight back with their next write (a worker's
//! complete-and-claim): with one statement at a time, writers that merely wait for the
//! statement before theirs otherwise split into two crowds that take turns, and each
//! statement carries half of them.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

use super::lent::{Kept, Lent};
use crate::QueueError;

/// How many statements of one kind may run at once before writes wait in line. One: a
/// second statement of a kind that starts while the first runs reads the queue as of its
/// own start, so its claims meet the rows the first just leased (committed since), and
/// PostgreSQL re-checks each of those against its latest version (`EvalPlanQual`, an
/// executor of its own set up per statement): with two, that was a tenth of the server's
/// time in the finishes at 4 workers. With one, what a second statement would have carried
/// waits and goes with the next (README, "One statement of a kind at a time").
pub(crate) const IN_FLIGHT: usize = 1;

/// The most writes one statement carries.
const MAX_BATCH: usize = 256;

/// How long a gathering line holds a statement for the writers of its last one, at most
/// (the runtime's timers go by the millisecond), and for how long after that statement
/// ended a write that finds the line idle waits for the others. At 4 workers one
/// complete-and-claim statement takes a few tenths of a millisecond; a writer that has not
/// come back within a millisecond is doing something else.
const GATHER_WAIT: Duration = Duration::from_millis(1);

/// How long a gathering line stops gathering after a gather in which someone it waited for
/// did not come: the writers no longer come straight back, and each wait would be lost.
const GATHER_PAUSE: Duration = Duration::from_secs(1);

type Reply<A> = oneshot::Sender<Result<A, QueueError>>;
type Answers<A> = Pin<Box<dyn Future<Output = (Lent, Vec<Result<A, QueueError>>)> + Send>>;
type WriteFn<W, A> = dyn Fn(Lent, Vec<W>) -> Answers<A> + Send + Sync;

/// A line of writes of one kind. `W` is a write, `A` its answer.
pub(crate) struct Committer<W, A> {
    line: Arc<Line<W, A>>,
}

impl<W, A> Clone for Committer<W, A> {
    fn clone(&self) -> Self {
        Committer {
            line: self.line.clone(),
        }
    }
}

impl<W, A> std::fmt::Debug for Committer<W, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committer").finish_non_exhaustive()
    }
}

struct Line<W, A> {
    pool: PgPool,
    /// What a write changes (a job), if anything: two writes with one key never share a
    /// statement, the later waits for the next.
    key: fn(&W) -> Option<Uuid>,
    /// Writes a batch in one go on the connection lent, and answers each of its writes, in
    /// order, giving the connection back.
    write: Box<WriteFn<W, A>>,
    /// Whether the line waits for the writers it has just answered ([`GATHER_WAIT`]).
    gathers: bool,
    /// Told of each write that comes while a gather waits.
    arrived: Notify,
    state: Mutex<State<W, A>>,
}

struct State<W, A> {
    /// Statements running. Writes wait only while this is at [`IN_FLIGHT`].
    running: usize,
    waiting: VecDeque<(W, Reply<A>)>,
    /// Connections given back by statements that ended without an error, for the next.
    kept: Kept,
    /// The writers of the last statement and those that waited while it ran: as many as a
    /// gathering line expects in its next statement.
    crowd: usize,
    /// When the last statement ended.
    ended: Instant,
    /// A gather holds the line's place, waiting for the crowd.
    gathering: bool,
    /// No gathering before then (a gather waited in vain).
    gather_again: Instant,
}

impl<W, A> State<W, A> {
    /// Whether a gathering line should wait for more writers before its next statement.
    fn short_of_crowd(&self) -> bool {
        self.crowd > 1
            && self.waiting.len() < self.crowd
            && Instant::now() >= self.gather_again
            && self.ended.elapsed() < GATHER_WAIT
    }
}

impl<W: Send + 'static, A: Send + 'static> Committer<W, A> {
    pub(crate) fn new<F, Fut>(pool: PgPool, key: fn(&W) -> Option<Uuid>, write: F) -> Self
    where
        F: Fn(Lent, Vec<W>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = (Lent, Vec<Result<A, QueueError>>)> + Send + 'static,
    {
        Self::line(pool, key, write, false)
    }

    /// A line that waits for the writers it has just answered, up to [`GATHER_WAIT`], when
    /// they come straight back: for writes whose writers write again as soon as they are
    /// answered, and only for those. A line whose writers also wait on another line would
    /// wait for writers held there.
    pub(crate) fn gathering<F, Fut>(pool: PgPool, key: fn(&W) -> Option<Uuid>, write: F) -> Self
    where
        F: Fn(Lent, Vec<W>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = (Lent, Vec<Result<A, QueueError>>)> + Send + 'static,
    {
        Self::line(pool, key, write, true)
    }

    fn line<F, Fut>(pool: PgPool, key: fn(&W) -> Option<Uuid>, write: F, gathers: bool) -> Self
    where
        F: Fn(Lent, Vec<W>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = (Lent, Vec<Result<A, QueueError>>)> + Send + 'static,
    {
        let now = Instant::now();
        Committer {
            line: Arc::new(Line {
                pool,
                key,
                write: Box::new(move |lent, writes| Box::pin(write(lent, writes))),
                gathers,
                arrived: Notify::new(),
                state: Mutex::new(State {
                    running: 0,
                    waiting: VecDeque::new(),
                    kept: Kept::default(),
                    crowd: 0,
                    ended: now,
                    gathering: false,
                    gather_again: now,
                }),
            }),
        }
    }

    /// Writes `write`, alone if a statement is free, else with whatever waits in line;
    /// answers once it is committed.
    pub(crate) async fn write(&self, write: W) -> Result<A, QueueError> {
        let waiting = {
            let mut state = self.line.state();
            if state.running < IN_FLIGHT && !(self.line.gathers && state.short_of_crowd()) {
                state.running += 1;
                Err(write)
            } else {
                let (reply, answer) = oneshot::channel();
                state.waiting.push_back((write, reply));
                if state.running < IN_FLIGHT {
                    // The line is free, but the others of the last statement are on their
                    // way back: this write holds the place and waits for them.
                    state.running += 1;
                    state.gathering = true;
                    drop(state);
                    tokio::spawn(gather(self.line.clone()));
                } else if state.gathering && state.waiting.len() >= state.crowd {
                    self.line.arrived.notify_one();
                }
                Ok(answer)
            }
        };
        match waiting {
            Ok(answer) => answer
                .await
                .map_err(|_| QueueError::from(sqlx::Error::PoolClosed))?,
            Err(write) => {
                // Given back however this ends, also if the caller stops waiting: then the
                // connection, dropped with the statement's future, goes back to the pool,
                // whose test on its return reads what the statement left unread.
                let _slot = Slot(self.line.clone());
                let (lent, mut answers) = (self.line.write)(self.line.lend(), vec![write]).await;
                self.line.keep(lent);
                self.line.ended(1);
                answers
                    .pop()
                    .unwrap_or_else(|| Err(sqlx::Error::RowNotFound.into()))
            }
        }
    }
}

impl<W, A> Line<W, A> {
    fn state(&self) -> MutexGuard<'_, State<W, A>> {
        // Counters, queued writes and idle connections: still consistent after a panic
        // elsewhere.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection for the next statement: the one the line kept last, if it has one.
    fn lend(&self) -> Lent {
        let (kept, stale) = self.state().kept.take();
        // Given back to the pool outside the line's lock: each goes on a task of its own.
        drop(stale);
        Lent::new(self.pool.clone(), kept)
    }

    /// A statement that carried `carried` writes ended: the crowd a gathering line expects
    /// next is those and the writes that waited meanwhile.
    fn ended(&self, carried: usize) {
        let mut state = self.state();
        state.crowd = carried + state.waiting.len();
        state.ended = Instant::now();
    }

    /// Keeps the connection a statement gave back, if it still has one: a connection on
    /// which a statement failed went back to the pool already ([`Lent::run`]).
    fn keep(&self, lent: Lent) {
        let Some(held) = lent.into_held() else { return };
        let left = self.state().kept.give_back(held, IN_FLIGHT);
        drop(left);
    }

    /// Takes the next batch off the line: the writes in order, but none whose key is
    /// already in the batch (it stays first in line for the next one).
    fn take_batch(&self, state: &mut State<W, A>) -> Vec<(W, Reply<A>)> {
        let mut keys = HashSet::new();
        let mut batch = Vec::new();
        let mut held = VecDeque::new();
        while let Some(next) = state.waiting.pop_front() {
            if batch.len() == MAX_BATCH {
                state.waiting.push_front(next);
                break;
            }
            match (self.key)(&next.0) {
                Some(key) if !keys.insert(key) => held.push_back(next),
                _ => batch.push(next),
            }
        }
        held.append(&mut state.waiting);
        state.waiting = held;
        batch
    }
}

/// A running statement's place: given back, it starts the line's next batch if writes wait.
struct Slot<W: Send + 'static, A: Send + 'static>(Arc<Line<W, A>>);

impl<W: Send + 'static, A: Send + 'static> Drop for Slot<W, A> {
    fn drop(&mut self) {
        let line = &self.0;
        let batch = {
            let mut state = line.state();
            if state.waiting.is_empty() {
                state.running -= 1;
                return;
            }
            if line.gathers && state.short_of_crowd() {
                state.gathering = true;
                None
            } else {
                Some(line.take_batch(&mut state))
            }
        };
        // The place passes to the batch (or to the gather that makes it), which gives it
        // back when it is done. With no runtime left (it is shutting down) nothing can run:
        // the waiting writers are told so by their dropped replies.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(match batch {
                Some(batch) => runtime.spawn(run_batch(line.clone(), batch)),
                None => runtime.spawn(gather(line.clone())),
            }),
            Err(_) => line.state().running -= 1,
        }
    }
}

/// Holds the line's place until the crowd of its last statement is back in line, or for
/// [`GATHER_WAIT`]; then writes whatever waits. A gather that waited in vain stops the line
/// gathering for [`GATHER_PAUSE`].
async fn gather<W: Send + 'static, A: Send + 'static>(line: Arc<Line<W, A>>) {
    let deadline = Instant::now() + GATHER_WAIT;
    let batch = loop {
        {
            let mut state = line.state();
            let now = Instant::now();
            if state.waiting.len() >= state.crowd || now >= deadline {
                if now >= deadline {
                    state.gather_again = now + GATHER_PAUSE;
                }
                state.gathering = false;
                break line.take_batch(&mut state);
            }
        }
        // A write that came between the look above and this wait left its permit.
        let _ = tokio::time::timeout_at(deadline, line.arrived.notified()).await;
    };
    run_batch(line, batch).await;
}

/// Writes a batch and answers each of its writers, then gives its place back.
async fn run_batch<W: Send + 'static, A: Send + 'static>(
    line: Arc<Line<W, A>>,
    batch: Vec<(W, Reply<A>)>,
) {
    let slot = Slot(line);
    let (writes, replies): (Vec<W>, Vec<Reply<A>>) = batch.into_iter().unzip();
    let carried = writes.len();
    let (lent, answers) = (slot.0.write)(slot.0.lend(), writes).await;
    slot.0.keep(lent);
    slot.0.ended(carried);
    drop(slot);
    for (reply, answer) in replies.into_iter().zip(answers) {
        // A writer that stopped waiting needs no answer.
        let _ = reply.send(answer);
    }
}

#[cfg(test)]
mod tests;
