//! The one write connection of an SQLite file, shared by every write transaction in turn,
//! with group commit.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{Mutex, OwnedMutexGuard, watch};
use tokio_util::sync::CancellationToken;

use super::checkpoint::{CheckpointConfig, Checkpointer, Running, WriterTurn};

/// Most operations one batch may hold before it commits even though more are waiting:
/// bounds how long the first operation of a batch waits for its commit.
const MAX_BATCH: u32 = 64;

/// The single write connection of one SQLite database file, shared by every write
/// transaction in turn, with group commit.
///
/// Each transaction of the queue runs as a savepoint inside a batch transaction. When it
/// ends and more transactions are already waiting for the connection, the batch stays
/// open for them, and it commits when nobody waits (or at [`MAX_BATCH`]): under load, one
/// commit then writes each dirtied page once for many transactions instead of once each,
/// which is what SQLite's throughput is bound by (WAL page writes, measured). A caller's
/// [`SqliteTx::commit`] returns only once its batch committed, so what it was told is
/// durable and visible to readers, exactly as with a commit of its own; if the batch's
/// commit fails, every transaction in it gets the error.
#[derive(Clone)]
pub(crate) struct SqliteWriter {
    shared: Arc<Shared>,
}

pub(super) struct Shared {
    state: Arc<Mutex<WriterState>>,
    /// Callers inside [`SqliteWriter::begin`], waiting for the connection: the hint that
    /// keeping a batch open is worth it. Correctness never depends on it (see
    /// [`SqliteTx::commit`]).
    waiting: AtomicUsize,
    _checkpointer: Running,
}

pub(super) struct WriterState {
    conn: Connection,
    batch: Option<Batch>,
    next_batch: u64,
}

struct Batch {
    id: u64,
    ops: u32,
    outcome: watch::Sender<Option<Result<(), String>>>,
}

impl fmt::Debug for SqliteWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SqliteWriter")
    }
}

/// Held weakly by the checkpointer, so that the connection closes with the writer rather
/// than with the checkpointer's thread, which notices the writer is gone only at its next
/// pass.
impl WriterTurn for Weak<Mutex<WriterState>> {
    fn with_turn<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        let writer = self.upgrade()?;
        // A std thread may block on the async mutex; the writer's turn is FIFO, so this
        // waits for the callers already in line and no longer.
        let mut state = writer.blocking_lock();
        commit_batch(&mut state);
        Some(f())
    }
}

impl SqliteWriter {
    /// How many callers wait for the connection now (tests wait for a queue to form).
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.shared.waiting.load(Ordering::SeqCst)
    }

    /// Opens the write connection with the settings of the read pool (WAL is a property of
    /// the file, already set by the pool; the rest are per connection).
    pub(crate) fn open(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Self> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(busy_timeout)?;
        // No automatic checkpoints on the writer: one runs inside the commit that crosses
        // the threshold, on the async task, and made that commit the slowest by far (the
        // claim-latency p99 went from 5-7 ms to under 2 ms without them). The checkpointer
        // thread copies the WAL back instead.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
             PRAGMA wal_autocheckpoint = 0;",
        )?;
        conn.set_prepared_statement_cache_capacity(64);
        let state = Arc::new(Mutex::new(WriterState {
            conn,
            batch: None,
            next_batch: 0,
        }));
        Ok(SqliteWriter {
            shared: Arc::new(Shared {
                _checkpointer: Checkpointer::new(
                    path,
                    busy_timeout,
                    Arc::downgrade(&state),
                    CheckpointConfig::default(),
                )?
                .start(CancellationToken::new())
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?,
                state,
                waiting: AtomicUsize::new(0),
            }),
        })
    }

    /// Waits for the writer's turn and opens a transaction. The batch around it holds
    /// SQLite's write lock from its first statement (`BEGIN IMMEDIATE`), so what the
    /// transaction reads stays true until it commits.
    pub(crate) async fn begin(&self) -> rusqlite::Result<SqliteTx> {
        let mut state = {
            let _waiting = Waiting::enter(&self.shared.waiting);
            self.shared.state.clone().lock_owned().await
        };
        if state.batch.is_none() {
            state.conn.execute_batch("BEGIN IMMEDIATE")?;
            let id = state.next_batch;
            state.next_batch += 1;
            state.batch = Some(Batch {
                id,
                ops: 0,
                outcome: watch::Sender::new(None),
            });
        }
        if let Err(error) = state.conn.execute_batch("SAVEPOINT op") {
            finish_op(&self.shared, &mut state);
            return Err(error);
        }
        Ok(SqliteTx {
            shared: self.shared.clone(),
            state: Some(state),
        })
    }
}

/// Counts a caller in [`Shared::waiting`] for as long as it lives, cancelled or not.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Waiting(counter)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Ends one transaction's turn: commits the batch unless more transactions wait to join
/// it, and answers every transaction of a committed batch.
fn finish_op(shared: &Shared, state: &mut WriterState) {
    let Some(batch) = state.batch.as_mut() else {
        return;
    };
    batch.ops += 1;
    if shared.waiting.load(Ordering::SeqCst) > 0 && batch.ops < MAX_BATCH {
        return;
    }
    commit_batch(state);
}

pub(super) fn commit_batch(state: &mut WriterState) {
    let Some(batch) = state.batch.take() else {
        return;
    };
    let outcome = state.conn.execute_batch("COMMIT").map_err(|error| {
        // Leave the connection clean for the next batch whatever the failure was.
        let _ = state.conn.execute_batch("ROLLBACK");
        error.to_string()
    });
    batch.outcome.send_replace(Some(outcome));
}

/// A write transaction on the writer connection: a savepoint in the current batch. Rolled
/// back if dropped uncommitted (a failed statement, or a caller's future dropped mid-way).
pub(crate) struct SqliteTx {
    shared: Arc<Shared>,
    state: Option<OwnedMutexGuard<WriterState>>,
}

impl SqliteTx {
    pub(crate) fn conn(&self) -> &Connection {
        &self
            .state
            .as_ref()
            .expect("an open transaction holds the writer")
            .conn
    }

    /// Releases the savepoint and returns once the batch holding it committed.
    ///
    /// When others wait to join, this hands the connection over with the batch open and
    /// queues for the connection again: the mutex is fair, so by the time it comes back
    /// either a later transaction committed the batch (whose outcome is then read) or
    /// the batch is still open, and this commits it. No batch is left open for a waiter
    /// that gave up.
    pub(crate) async fn commit(mut self) -> rusqlite::Result<()> {
        let mut state = self
            .state
            .take()
            .expect("an open transaction holds the writer");
        if let Err(error) = state.conn.execute_batch("RELEASE op") {
            rollback_op(&self.shared, &mut state);
            return Err(error);
        }
        let Some(batch) = state.batch.as_ref() else {
            return Err(batch_lost());
        };
        let (id, mut outcome) = (batch.id, batch.outcome.subscribe());
        finish_op(&self.shared, &mut state);
        drop(state);
        if outcome.borrow().is_none() {
            let mut state = self.shared.state.clone().lock_owned().await;
            if state.batch.as_ref().is_some_and(|b| b.id == id) {
                commit_batch(&mut state);
            }
        }
        let answer = outcome.borrow_and_update().clone();
        match answer {
            Some(Ok(())) => Ok(()),
            Some(Err(message)) => Err(batch_failed(message)),
            None => Err(batch_lost()),
        }
    }

    pub(crate) fn rollback(mut self) -> rusqlite::Result<()> {
        let mut state = self
            .state
            .take()
            .expect("an open transaction holds the writer");
        rollback_op(&self.shared, &mut state);
        Ok(())
    }
}

/// Undoes one transaction's writes and ends its turn; the batch's other transactions are
/// untouched.
fn rollback_op(shared: &Shared, state: &mut WriterState) {
    let undone = state.conn.execute_batch("ROLLBACK TO op; RELEASE op");
    if let Err(error) = undone {
        // The savepoint is unusable, so the batch is too: fail it as a whole rather than
        // commit something half-undone.
        tracing::error!(%error, "rolling back an SQLite savepoint failed; abandoning its batch");
        if let Some(batch) = state.batch.take() {
            let _ = state.conn.execute_batch("ROLLBACK");
            batch
                .outcome
                .send_replace(Some(Err(format!("the batch was rolled back: {error}"))));
        }
        return;
    }
    finish_op(shared, state);
}

fn batch_failed(message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
        Some(format!("the group commit failed: {message}")),
    )
}

fn batch_lost() -> rusqlite::Error {
    batch_failed("the batch ended without an outcome".into())
}

impl Drop for SqliteTx {
    fn drop(&mut self) {
        if let Some(mut state) = self.state.take() {
            rollback_op(&self.shared, &mut state);
        }
    }
}
