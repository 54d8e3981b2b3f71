//! SQLite's write path: one rusqlite connection that every write transaction takes in turn
//! and drives inline, on the calling task.
//!
//! Why not sqlx here: sqlx runs each SQLite connection on its own thread, so every
//! statement costs two thread wake-ups, and a transition of four statements spent about
//! 90 % of its time switching threads (perf, `stepwise bench queue`). SQLite admits one
//! writer at a time anyway; taking that turn in-process, with an async mutex, also spares
//! writers the busy handler, which sleeps in steps of milliseconds. A statement here runs
//! for microseconds, so running it on the async task costs less than handing it off.
//! Reads stay on the sqlx pool, where WAL lets them run beside the writer.
//!
//! Past 500 lines: about 210 of them are tests that drive the writer and the checkpointer
//! directly, and the rest is one writer with its checkpointer, which are read together.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex as StdMutex, Weak};
use std::time::Duration;

use chrono::DateTime;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, Statement, ToSql};
use serde::de::DeserializeOwned;
use sqlx::types::Json;
use tokio::sync::{Mutex, OwnedMutexGuard, watch};

use super::{Arg, Id, Ts, decode_err};

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

struct Shared {
    state: Arc<Mutex<WriterState>>,
    /// Callers inside [`SqliteWriter::begin`], waiting for the connection: the hint that
    /// keeping a batch open is worth it. Correctness never depends on it (see
    /// [`SqliteTx::commit`]).
    waiting: AtomicUsize,
    _checkpointer: Checkpointer,
}

/// How often the checkpointer copies committed WAL frames back into the database file
/// while writes are idle, and while they are not.
const CHECKPOINT_IDLE: Duration = Duration::from_millis(100);
const CHECKPOINT_BUSY: Duration = Duration::from_millis(20);

/// WAL frames (pages) past which the checkpointer makes the log start over: SQLite's own
/// auto-checkpoint threshold, about 4 MiB of log.
const RESTART_FRAMES: i64 = 1000;

/// Before taking the writer's turn to restart the log: at most this many more passive
/// passes, until one finds no more than this many new frames, and none once the log holds
/// [`LONG_LOG_FRAMES`] (about 32 MiB).
const CATCH_UP_PASSES: usize = 3;
const CATCH_UP_FRAMES: i64 = 64;
const LONG_LOG_FRAMES: i64 = 8 * RESTART_FRAMES;

/// A thread with its own connection that checkpoints, so that no commit pays for one.
/// Stops when dropped.
///
/// Passive checkpoints copy frames back without blocking the writer or readers, but they
/// never end the log: SQLite starts the WAL over only when a write begins with every frame
/// already copied back, which under steady writes never happens by itself. The log then
/// grew without bound (723 MB for a 27 MB database in `stepwise bench queue`), and writing
/// ever new file pages cost a fifth of the CPU in the kernel zeroing them. So once the log
/// passes [`RESTART_FRAMES`], the checkpointer takes the writer's turn (committing the
/// batch it finds open, as any writer may), copies back the few frames written since its
/// last pass, and lets go: the next write starts the log over, and the file's pages are
/// reused.
struct Checkpointer {
    stop: Arc<(StdMutex<bool>, Condvar)>,
}

impl Checkpointer {
    fn start(
        path: &Path,
        busy_timeout: Duration,
        writer: Weak<Mutex<WriterState>>,
    ) -> rusqlite::Result<Self> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(busy_timeout)?;
        let stop = Arc::new((StdMutex::new(false), Condvar::new()));
        let signal = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                let (stopped, wake) = &*signal;
                let mut every = CHECKPOINT_IDLE;
                let mut last_log = 0;
                loop {
                    // The flag's lock is let go before a pass: a pass may wait for the
                    // writer's turn, and whoever drops the writer must never wait for that.
                    let guard = stopped.lock().unwrap_or_else(|e| e.into_inner());
                    let (guard, _) = wake
                        .wait_timeout_while(guard, every, |stopped| !*stopped)
                        .unwrap_or_else(|e| e.into_inner());
                    if *guard {
                        return;
                    }
                    drop(guard);
                    every = match checkpoint(&conn, &writer, &mut last_log) {
                        Ok(true) => CHECKPOINT_BUSY,
                        Ok(false) => CHECKPOINT_IDLE,
                        Err(error) => {
                            tracing::warn!(%error, "SQLite checkpoint failed; retrying");
                            CHECKPOINT_IDLE
                        }
                    };
                }
            });
        if let Err(error) = spawned {
            return Err(rusqlite::Error::ToSqlConversionFailure(Box::new(error)));
        }
        Ok(Checkpointer { stop })
    }
}

/// One pass of the checkpointer; returns whether the log grew since the last pass.
fn checkpoint(
    conn: &Connection,
    writer: &Weak<Mutex<WriterState>>,
    last_log: &mut i64,
) -> rusqlite::Result<bool> {
    // Frames in the log, all copied back unless a reader still needed older ones; -1
    // while another connection checkpoints (a second process on the file, say).
    let passive = || {
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            row.get::<_, i64>(1)
        })
    };
    let mut log = passive()?;
    let grew = log != *last_log;
    *last_log = log;
    if log < RESTART_FRAMES || !grew {
        // Idle with every frame copied back: the next write starts the log over by itself.
        return Ok(grew);
    }
    // Catch up without blocking anyone first, so that the pass in the writer's turn is
    // short: each pass copies what was written during the one before. That converges only
    // while copies outpace writes; when they do not, or the log is already long, the
    // writer waits for the last pass instead, which bounds the log.
    let mut behind = log;
    for _ in 0..CATCH_UP_PASSES {
        if log >= LONG_LOG_FRAMES {
            break;
        }
        let before = log;
        log = passive()?;
        let new = log - before;
        if new <= CATCH_UP_FRAMES || new * 2 > behind {
            break;
        }
        behind = new;
    }
    // Held weakly, so that the connection closes with the writer rather than with this
    // thread, which notices the writer is gone only at its next tick.
    let Some(writer) = writer.upgrade() else {
        return Ok(false);
    };
    // A std thread may block on the async mutex; the writer's turn is FIFO, so this waits
    // for the callers already in line and no longer.
    let mut state = writer.blocking_lock();
    commit_batch(&mut state);
    let tail = passive();
    drop(state);
    *last_log = tail?;
    Ok(true)
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
    }
}

struct WriterState {
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

impl SqliteWriter {
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
                _checkpointer: Checkpointer::start(path, busy_timeout, Arc::downgrade(&state))?,
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

fn commit_batch(state: &mut WriterState) {
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

/// Binds `args` to a statement written with sqlx's `$N` placeholders: SQLite numbers named
/// parameters by first appearance, so `$N` is looked up by name, as sqlx does, rather than
/// trusted to be the N-th parameter. The SQL text is then the same for both drivers.
pub(crate) fn bind(stmt: &mut Statement<'_>, args: &[Arg<'_>]) -> rusqlite::Result<()> {
    for index in 1..=stmt.parameter_count() {
        let n = stmt
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=args.len()).contains(n))
            .ok_or(rusqlite::Error::InvalidParameterCount(index, args.len()))?;
        stmt.raw_bind_parameter(index, &args[n - 1])?;
    }
    Ok(())
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Arg::Id(id) => ToSqlOutput::from(id.hyphenated().to_string()),
            Arg::Text(text) => text.to_sql()?,
            Arg::Int(n) => ToSqlOutput::from(*n),
            Arg::BigInt(n) => ToSqlOutput::from(*n),
            Arg::Ts(at) => match at {
                Some(at) => ToSqlOutput::from(at.timestamp_millis()),
                None => ToSqlOutput::from(rusqlite::types::Null),
            },
            Arg::Json(value) => ToSqlOutput::from(value.to_string()),
            Arg::TextList(list) => match list {
                Some(list) => ToSqlOutput::from(json_text(list)?),
                None => ToSqlOutput::from(rusqlite::types::Null),
            },
        })
    }
}

/// JSON text for a TEXT column checked with `json_valid`.
pub(crate) fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> rusqlite::Result<String> {
    serde_json::to_string(value).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// A column value decoded the way the sqlx side decodes it, so the row decoders of
/// `store/mod.rs` run unchanged on a rusqlite row.
pub(crate) trait FromColumn: Sized {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error>;
}

fn mismatch(expected: &str, value: ValueRef<'_>) -> sqlx::Error {
    decode_err(std::io::Error::other(format!(
        "expected {expected}, found {}",
        value.data_type()
    )))
}

impl FromColumn for String {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Text(bytes) => String::from_utf8(bytes.to_vec()).map_err(decode_err),
            other => Err(mismatch("TEXT", other)),
        }
    }
}

impl FromColumn for i64 {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Integer(n) => Ok(n),
            other => Err(mismatch("INTEGER", other)),
        }
    }
}

impl FromColumn for i32 {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        i32::try_from(i64::from_column(value)?).map_err(decode_err)
    }
}

impl FromColumn for Id {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Text(bytes) => uuid::Uuid::try_parse_ascii(bytes)
                .map(Id)
                .map_err(decode_err),
            other => Err(mismatch("a UUID as TEXT", other)),
        }
    }
}

impl FromColumn for Ts {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        let millis = i64::from_column(value)?;
        DateTime::from_timestamp_millis(millis)
            .map(Ts)
            .ok_or_else(|| {
                decode_err(std::io::Error::other(format!(
                    "timestamp {millis} ms is out of range"
                )))
            })
    }
}

impl<T: DeserializeOwned> FromColumn for Json<T> {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Text(bytes) => serde_json::from_slice(bytes).map(Json).map_err(decode_err),
            other => Err(mismatch("JSON TEXT", other)),
        }
    }
}

impl<T: FromColumn> FromColumn for Option<T> {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Null => Ok(None),
            other => T::from_column(other).map(Some),
        }
    }
}

/// `try_get` by column name on a rusqlite row, with sqlx's signature and errors.
pub(crate) trait RowExt {
    fn try_get<T: FromColumn, I: AsRef<str>>(&self, name: I) -> Result<T, sqlx::Error>;
}

impl RowExt for rusqlite::Row<'_> {
    fn try_get<T: FromColumn, I: AsRef<str>>(&self, name: I) -> Result<T, sqlx::Error> {
        let name = name.as_ref();
        let value = self
            .get_ref(name)
            .map_err(|_| sqlx::Error::ColumnNotFound(name.to_string()))?;
        T::from_column(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_placeholders_bind_by_number_not_by_position() {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare("SELECT $2 || '-' || $1 || '-' || $2").unwrap();
        bind(&mut stmt, &[Arg::text("a"), Arg::text("b")]).unwrap();
        let mut rows = stmt.raw_query();
        let row = rows.next().unwrap().unwrap();
        assert_eq!(row.get::<_, String>(0).unwrap(), "b-a-b");
    }

    #[test]
    fn a_placeholder_beyond_the_arguments_is_an_error_not_a_null() {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare("SELECT $3").unwrap();
        assert!(bind(&mut stmt, &[Arg::text("a")]).is_err());
    }

    #[tokio::test]
    async fn a_dropped_transaction_rolls_back_and_frees_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let writer = SqliteWriter::open(&dir.path().join("t.db"), Duration::from_secs(1)).unwrap();
        {
            let tx = writer.begin().await.unwrap();
            tx.conn()
                .execute_batch("CREATE TABLE t (x INTEGER)")
                .unwrap();
        }
        let tx = writer.begin().await.unwrap();
        let exists: i64 = tx
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 't'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(exists, 0);
        tx.rollback().unwrap();
    }

    async fn table(dir: &tempfile::TempDir) -> SqliteWriter {
        let writer = SqliteWriter::open(&dir.path().join("t.db"), Duration::from_secs(1)).unwrap();
        let tx = writer.begin().await.unwrap();
        tx.conn()
            .execute_batch("CREATE TABLE t (x INTEGER)")
            .unwrap();
        tx.commit().await.unwrap();
        writer
    }

    fn count(writer_dir: &tempfile::TempDir) -> i64 {
        // A separate connection: only what was committed is visible to it.
        let reader = Connection::open(writer_dir.path().join("t.db")).unwrap();
        reader
            .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_transactions_share_commits_and_a_rollback_undoes_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let writer = table(&dir).await;
        let mut tasks = Vec::new();
        for i in 0..200_i64 {
            let writer = writer.clone();
            tasks.push(tokio::spawn(async move {
                let tx = writer.begin().await.unwrap();
                tx.conn().execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
                if i % 2 == 0 {
                    tx.commit().await.unwrap();
                } else {
                    tx.rollback().unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(count(&dir), 100);
    }

    /// A writer whose first transaction holds the connection (one row written) while a
    /// task running `then` is counted as waiting for it.
    async fn first_with_one_waiting<F, Fut>(
        then: F,
    ) -> (
        tempfile::TempDir,
        SqliteWriter,
        SqliteTx,
        tokio::task::JoinHandle<()>,
    )
    where
        F: FnOnce(SqliteWriter) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let dir = tempfile::tempdir().unwrap();
        let writer = table(&dir).await;
        let first = writer.begin().await.unwrap();
        first
            .conn()
            .execute("INSERT INTO t VALUES (1)", [])
            .unwrap();
        let waiter = tokio::spawn(then(writer.clone()));
        while writer.shared.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        (dir, writer, first, waiter)
    }

    #[tokio::test]
    async fn a_commit_returns_only_once_its_writes_are_visible_to_readers() {
        // A second transaction queues for the writer, so the first leaves its batch open
        // for it; the first commit must still not return before the batch committed.
        let (dir, writer, first, second) = first_with_one_waiting(|writer| async move {
            let tx = writer.begin().await.unwrap();
            tx.conn().execute("INSERT INTO t VALUES (2)", []).unwrap();
            tx.commit().await.unwrap();
        })
        .await;
        drop(writer);
        first.commit().await.unwrap();
        assert!(count(&dir) >= 1);
        second.await.unwrap();
        assert_eq!(count(&dir), 2);
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_does_not_strand_an_open_batch() {
        let (dir, _writer, first, quitter) = first_with_one_waiting(|writer| async move {
            let _ = writer.begin().await;
        })
        .await;
        // Counted as waiting when the first commits, so the batch is left open for it;
        // then it gives up without ever taking the connection.
        let committing = tokio::spawn(first.commit());
        tokio::task::yield_now().await;
        quitter.abort();
        let committed = tokio::time::timeout(Duration::from_secs(10), committing)
            .await
            .expect("the commit must not wait forever for a waiter that left");
        committed.unwrap().unwrap();
        assert_eq!(count(&dir), 1);
    }

    #[tokio::test]
    async fn under_steady_writes_the_wal_starts_over_instead_of_growing() {
        let dir = tempfile::tempdir().unwrap();
        let writer = table(&dir).await;
        // Commits back to back for two seconds, at least 5,000 of them, each of one row a
        // page long: the log would hold every one of those pages if it never started over.
        // How long the file gets before each restart depends on how often the checkpointer
        // thread is scheduled (a loaded CI machine once let it reach a third of what was
        // written), so what is asserted is the restarts themselves: SQLite counts them in
        // the WAL header's checkpoint sequence number, which it bumps each time the log
        // starts over.
        let started = std::time::Instant::now();
        let mut commits = 0_u64;
        while commits < 5000 || started.elapsed() < Duration::from_secs(2) {
            let tx = writer.begin().await.unwrap();
            tx.conn()
                .execute("INSERT INTO t VALUES (zeroblob(3000))", [])
                .unwrap();
            tx.commit().await.unwrap();
            commits += 1;
        }
        let written = commits * 4096;
        let wal = std::fs::read(dir.path().join("t.db-wal")).unwrap();
        let restarts = u32::from_be_bytes(wal[12..16].try_into().unwrap());
        assert!(
            restarts >= 1 && (wal.len() as u64) < written,
            "the WAL grew to {} bytes for {written} bytes of pages written and started over \
             {restarts} times: it must start over while writes go on",
            wal.len()
        );
    }

    #[tokio::test]
    async fn the_checkpointer_copies_the_wal_back_without_a_commit_paying_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let writer = table(&dir).await;
        for _ in 0..40 {
            let tx = writer.begin().await.unwrap();
            tx.conn()
                .execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) \
                     INSERT INTO t SELECT zeroblob(1000) FROM n",
                    [],
                )
                .unwrap();
            tx.commit().await.unwrap();
        }
        // About 2 MB was written, all of it to the WAL first. Automatic checkpoints are off
        // and nothing here checkpoints, so the database file itself only grows once the
        // checkpointer copied the pages back.
        let file = dir.path().join("t.db");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(&file).unwrap().len() < 1_500_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "the WAL was never checkpointed into {}",
                file.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
