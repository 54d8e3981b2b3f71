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

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use sqlx::PgPool;
use tokio::sync::oneshot;
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
    state: Mutex<State<W, A>>,
}

struct State<W, A> {
    /// Statements running. Writes wait only while this is at [`IN_FLIGHT`].
    running: usize,
    waiting: VecDeque<(W, Reply<A>)>,
    /// Connections given back by statements that ended without an error, for the next.
    kept: Kept,
}

impl<W: Send + 'static, A: Send + 'static> Committer<W, A> {
    pub(crate) fn new<F, Fut>(pool: PgPool, key: fn(&W) -> Option<Uuid>, write: F) -> Self
    where
        F: Fn(Lent, Vec<W>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = (Lent, Vec<Result<A, QueueError>>)> + Send + 'static,
    {
        Committer {
            line: Arc::new(Line {
                pool,
                key,
                write: Box::new(move |lent, writes| Box::pin(write(lent, writes))),
                state: Mutex::new(State {
                    running: 0,
                    waiting: VecDeque::new(),
                    kept: Kept::default(),
                }),
            }),
        }
    }

    /// Writes `write`, alone if a statement is free, else with whatever waits in line;
    /// answers once it is committed.
    pub(crate) async fn write(&self, write: W) -> Result<A, QueueError> {
        let waiting = {
            let mut state = self.line.state();
            if state.running < IN_FLIGHT {
                state.running += 1;
                Err(write)
            } else {
                let (reply, answer) = oneshot::channel();
                state.waiting.push_back((write, reply));
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
            line.take_batch(&mut state)
        };
        // The place passes to the batch, which gives it back when it is done. With no
        // runtime left (it is shutting down) nothing can run: the waiting writers are told
        // so by their dropped replies.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(run_batch(line.clone(), batch))),
            Err(_) => line.state().running -= 1,
        }
    }
}

/// Writes a batch and answers each of its writers, then gives its place back.
async fn run_batch<W: Send + 'static, A: Send + 'static>(
    line: Arc<Line<W, A>>,
    batch: Vec<(W, Reply<A>)>,
) {
    let slot = Slot(line);
    let (writes, replies): (Vec<W>, Vec<Reply<A>>) = batch.into_iter().unzip();
    let (lent, answers) = (slot.0.write)(slot.0.lend(), writes).await;
    slot.0.keep(lent);
    drop(slot);
    for (reply, answer) in replies.into_iter().zip(answers) {
        // A writer that stopped waiting needs no answer.
        let _ = reply.send(answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A pool that never connects: these tests write nothing to a database.
    fn no_pool() -> PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .unwrap()
    }

    /// The values of each batch a recording committer's "statement" wrote, in order.
    type Batches = Arc<Mutex<Vec<Vec<u32>>>>;

    /// A committer whose "statement" records its batch and answers each write with its
    /// value, after `delay`. A write is (key, value).
    fn recording(delay: Duration) -> (Committer<(u128, u32), u32>, Batches) {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let seen = batches.clone();
        let key = |w: &(u128, u32)| Some(Uuid::from_u128(w.0));
        let committer = Committer::new(no_pool(), key, move |lent, writes: Vec<(u128, u32)>| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(writes.iter().map(|w| w.1).collect());
                tokio::time::sleep(delay).await;
                (lent, writes.into_iter().map(|w| Ok(w.1)).collect())
            }
        });
        (committer, batches)
    }

    fn spawn_write(
        committer: &Committer<(u128, u32), u32>,
        write: (u128, u32),
    ) -> tokio::task::JoinHandle<Result<u32, QueueError>> {
        let committer = committer.clone();
        tokio::spawn(async move { committer.write(write).await })
    }

    #[tokio::test]
    async fn a_write_on_an_idle_line_goes_out_alone_and_at_once() {
        let (committer, batches) = recording(Duration::ZERO);
        assert_eq!(committer.write((1, 10)).await.unwrap(), 10);
        assert_eq!(committer.write((1, 11)).await.unwrap(), 11);
        assert_eq!(*batches.lock().unwrap(), vec![vec![10], vec![11]]);
    }

    #[tokio::test]
    async fn writes_that_wait_while_statements_run_share_the_next_one() {
        let (committer, batches) = recording(Duration::from_millis(50));
        let writes: Vec<_> = (0..10u32)
            .map(|n| spawn_write(&committer, (u128::from(n), n * 10)))
            .collect();
        for (n, write) in writes.into_iter().enumerate() {
            assert_eq!(write.await.unwrap().unwrap(), n as u32 * 10);
        }
        let batches = batches.lock().unwrap();
        // As many went out alone as statements may run; the rest, which waited, together.
        assert_eq!(batches.len(), IN_FLIGHT + 1, "{batches:?}");
        let mut all: Vec<u32> = batches.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).map(|n| n * 10).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn two_writes_of_one_key_never_share_a_statement() {
        let (committer, batches) = recording(Duration::from_millis(20));
        let writes: Vec<_> = [(1, 1), (2, 2), (7, 3), (7, 4), (7, 5), (3, 6)]
            .into_iter()
            .map(|w| spawn_write(&committer, w))
            .collect();
        for write in writes {
            write.await.unwrap().unwrap();
        }
        let batches = batches.lock().unwrap();
        for batch in batches.iter() {
            let sevens = batch.iter().filter(|v| (3..=5).contains(*v)).count();
            assert!(sevens <= 1, "{batches:?}");
        }
        assert_eq!(batches.iter().flatten().count(), 6, "{batches:?}");
    }

    #[tokio::test]
    async fn a_writer_that_stops_waiting_loses_nobody_else_their_answer() {
        // Long enough that every statement still runs when the waiting writer gives up.
        let (committer, batches) = recording(Duration::from_millis(500));
        // Every statement busy, so the next two writes share the next one.
        let busy: Vec<_> = (0..IN_FLIGHT as u32)
            .map(|n| spawn_write(&committer, (u128::from(n) + 10, n + 10)))
            .collect();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let gone = tokio::time::timeout(Duration::from_millis(5), committer.write((1, 1))).await;
        assert!(gone.is_err(), "the write should still be waiting");
        assert_eq!(committer.write((2, 2)).await.unwrap(), 2);
        for write in busy {
            write.await.unwrap().unwrap();
        }
        assert!(batches.lock().unwrap().contains(&vec![1, 2]));
    }

    #[tokio::test]
    async fn a_writer_that_stops_while_its_own_statement_runs_still_frees_its_place() {
        // The statement far outlasts the writer's patience: a timeout whose inner future is
        // ready when it is polled answers that, so on a loaded machine a statement of 30 ms
        // could end before a 5 ms timeout was looked at.
        let (committer, _) = recording(Duration::from_millis(500));
        for n in 0..IN_FLIGHT as u128 {
            let gone =
                tokio::time::timeout(Duration::from_millis(5), committer.write((n, 0))).await;
            assert!(gone.is_err());
        }
        let answer = tokio::time::timeout(Duration::from_secs(5), committer.write((9, 9))).await;
        assert_eq!(answer.expect("the line must not stay blocked").unwrap(), 9);
    }

    /// A committer whose statement answers the server process it ran on, or fails as
    /// the server refuses `SELECT 1/0` when its write is 0.
    fn backends(pool: PgPool) -> Committer<u32, i32> {
        Committer::new(
            pool,
            |_| None,
            |mut lent, writes: Vec<u32>| async move {
                let mut answers = Vec::new();
                for write in writes {
                    let sql = if write == 0 {
                        "SELECT 1/0"
                    } else {
                        "SELECT pg_backend_pid()"
                    };
                    let answer = lent
                        .run(async |conn| Ok(sqlx::query_scalar(sql).fetch_one(conn).await?))
                        .await;
                    answers.push(answer);
                }
                (lent, answers)
            },
        )
    }

    /// Waits up to five seconds for `done`, which the pool's work on tasks of its own
    /// makes true a little later; fails naming `what` did not happen.
    async fn within_seconds(what: &str, mut done: impl AsyncFnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !done().await {
            assert!(std::time::Instant::now() < deadline, "not {what} in time");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A pool of the scratch database's own, which no one else has used.
    async fn fresh_pool(scratch: &crate::ScratchPostgres) -> PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(scratch.url())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_line_keeps_the_connection_its_statement_ran_on_for_the_next() {
        let (scratch, _db, _) = super::super::scratch("stepwise_t_kept").await;
        let pool = fresh_pool(&scratch).await;
        let committer = backends(pool.clone());
        let first = committer.write(1).await.unwrap();
        for _ in 0..5 {
            assert_eq!(committer.write(1).await.unwrap(), first);
        }
        // Kept by the line, not given back: nothing idle in the pool, one connection open.
        assert_eq!((pool.size(), pool.num_idle()), (1, 0));
        drop(committer);
        scratch.drop_database().await.unwrap();
    }

    #[tokio::test]
    async fn a_line_gives_a_connection_whose_statement_failed_back_to_the_pool() {
        let (scratch, _db, _) = super::super::scratch("stepwise_t_given").await;
        let pool = fresh_pool(&scratch).await;
        let committer = backends(pool.clone());
        committer.write(1).await.unwrap();
        assert!(committer.write(0).await.is_err());
        // Given back, the pool tests it on its own task: wait for it to be idle there.
        within_seconds("given back to the pool", async || pool.num_idle() == 1).await;
        assert_eq!((pool.size(), pool.num_idle()), (1, 1));
        // The next statement takes a connection from the pool again, and the line keeps it.
        committer.write(1).await.unwrap();
        assert_eq!(pool.num_idle(), 0);
        drop(committer);
        scratch.drop_database().await.unwrap();
    }

    #[tokio::test]
    async fn a_connection_whose_transaction_failed_is_not_left_inside_it() {
        let (scratch, _db, _) = super::super::scratch("stepwise_t_rolled").await;
        let pool = fresh_pool(&scratch).await;
        // A line whose write opens a transaction that the server refuses, and answers the
        // write as done, as a finish's conflict is answered as a row that changed.
        let committer: Committer<u32, ()> = Committer::new(
            pool.clone(),
            |_| None,
            |mut lent, writes: Vec<u32>| async move {
                let refused = lent
                    .run(async |conn| {
                        let mut tx = sqlx::Connection::begin(conn).await?;
                        sqlx::query("SELECT 1/0").execute(&mut *tx).await?;
                        tx.commit().await?;
                        Ok(())
                    })
                    .await;
                assert!(refused.is_err());
                (lent, writes.iter().map(|_| Ok(())).collect())
            },
        );
        committer.write(1).await.unwrap();
        within_seconds(
            "no connection left inside its failed transaction",
            async || {
                let inside: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
                )
                .fetch_one(&pool)
                .await
                .unwrap();
                inside == 0
            },
        )
        .await;
        drop(committer);
        scratch.drop_database().await.unwrap();
    }
}
