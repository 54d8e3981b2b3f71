//! The checkpointer: a thread with its own connection that copies the WAL back, and makes
//! the log start over, so that no commit pays for either.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex as StdMutex, Weak};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::Mutex;

use super::writer::{WriterState, commit_batch};

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
pub(super) struct Checkpointer {
    stop: Arc<(StdMutex<bool>, Condvar)>,
}

impl Checkpointer {
    pub(super) fn start(
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
