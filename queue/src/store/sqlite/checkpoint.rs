//! The checkpointer: a thread with its own connection that copies the WAL back, and makes
//! the log start over, so that no commit pays for either. Shaped like the queue's other
//! background services (a config with defaults, `new`, `start(stop)`, a testable
//! `run_once`), on a thread rather than a task because each pass blocks on SQLite.

use std::path::Path;
use std::thread::Thread;
use std::time::Duration;

use rusqlite::Connection;
use tokio_util::sync::CancellationToken;

/// The writer's turn, as the checkpointer takes it: once the callers already in line are
/// done, with the batch it finds open committed (as any writer may), `f` runs before the
/// turn is let go. `None` once the writer is gone. The writer implements it; this file
/// knows no more of the writer than that.
pub(super) trait WriterTurn: Send + 'static {
    fn with_turn<T>(&self, f: impl FnOnce() -> T) -> Option<T>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CheckpointConfig {
    /// How often passes run while writes are idle, and while they are not.
    pub idle: Duration,
    pub busy: Duration,
    /// WAL frames (pages) past which the log is made to start over. The default is
    /// SQLite's own auto-checkpoint threshold, about 4 MiB of log.
    pub restart_frames: i64,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            idle: Duration::from_millis(100),
            busy: Duration::from_millis(20),
            restart_frames: 1000,
        }
    }
}

/// Before taking the writer's turn to restart the log: at most this many more passive
/// passes, until one finds no more than this many new frames, and none once the log holds
/// eight times `restart_frames` (about 32 MiB by default).
const CATCH_UP_PASSES: usize = 3;
const CATCH_UP_FRAMES: i64 = 64;
const LONG_LOG_RESTARTS: i64 = 8;

/// A connection of its own that checkpoints, so that no commit pays for one.
///
/// Passive checkpoints copy frames back without blocking the writer or readers, but they
/// never end the log: SQLite starts the WAL over only when a write begins with every frame
/// already copied back, which under steady writes never happens by itself. The log then
/// grew without bound (723 MB for a 27 MB database in `stepwise bench queue`), and writing
/// ever new file pages cost a fifth of the CPU in the kernel zeroing them. So once the log
/// passes `restart_frames`, the checkpointer takes the writer's turn (committing the
/// batch it finds open, as any writer may), copies back the few frames written since its
/// last pass, and lets go: the next write starts the log over, and the file's pages are
/// reused.
pub(super) struct Checkpointer<W> {
    conn: Connection,
    writer: W,
    config: CheckpointConfig,
    /// The log's length after the last pass, in frames.
    last_log: i64,
}

/// A started checkpointer's thread; dropping this stops it at once.
pub(super) struct Running {
    stop: CancellationToken,
    thread: Thread,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        self.thread.unpark();
    }
}

impl<W: WriterTurn> Checkpointer<W> {
    pub(super) fn new(
        path: &Path,
        busy_timeout: Duration,
        writer: W,
        config: CheckpointConfig,
    ) -> rusqlite::Result<Self> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(busy_timeout)?;
        Ok(Checkpointer {
            conn,
            writer,
            config,
            last_log: 0,
        })
    }

    /// Runs a pass every `idle` (every `busy` while the log grows) on a thread of its own,
    /// until `stop` fires or the returned handle is dropped. A failed pass is logged and
    /// tried again at the next.
    pub(super) fn start(mut self, stop: CancellationToken) -> std::io::Result<Running> {
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                let mut every = self.config.idle;
                loop {
                    // Woken early only to stop; a spurious wake-up costs one early pass.
                    std::thread::park_timeout(every);
                    if stopped.is_cancelled() {
                        return;
                    }
                    every = match self.run_once() {
                        Ok(true) => self.config.busy,
                        Ok(false) => self.config.idle,
                        Err(error) => {
                            tracing::warn!(%error, "SQLite checkpoint failed; retrying");
                            self.config.idle
                        }
                    };
                }
            })?;
        Ok(Running {
            stop,
            thread: thread.thread().clone(),
        })
    }

    /// One pass; returns whether the log grew since the last one.
    pub(super) fn run_once(&mut self) -> rusqlite::Result<bool> {
        checkpoint(
            &self.conn,
            &self.writer,
            &mut self.last_log,
            self.config.restart_frames,
        )
    }
}

fn checkpoint(
    conn: &Connection,
    writer: &impl WriterTurn,
    last_log: &mut i64,
    restart_frames: i64,
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
    if log < restart_frames || !grew {
        // Idle with every frame copied back: the next write starts the log over by itself.
        return Ok(grew);
    }
    // Catch up without blocking anyone first, so that the pass in the writer's turn is
    // short: each pass copies what was written during the one before. That converges only
    // while copies outpace writes; when they do not, or the log is already long, the
    // writer waits for the last pass instead, which bounds the log.
    let mut behind = log;
    for _ in 0..CATCH_UP_PASSES {
        if log >= LONG_LOG_RESTARTS * restart_frames {
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
    let Some(tail) = writer.with_turn(passive) else {
        return Ok(false);
    };
    *last_log = tail?;
    Ok(true)
}
