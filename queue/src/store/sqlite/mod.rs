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
//! The SQLite driver: the writer, its checkpointer, the claim, and how rusqlite binds and
//! decodes the store's statements. The store's per-concern files call into it where SQLite differs.

mod checkpoint;
mod claim;
mod columns;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use claim::claim;
pub(crate) use columns::{RowExt, bind};
pub(crate) use writer::{SqliteTx, SqliteWriter};

/// Draws `$1` event ids at once and returns the last: SQLite hands out AUTOINCREMENT ids
/// from `sqlite_sequence`, so an id drawn there stays below every later event's, as an
/// insert's would. For the events a job's row keeps (`kept.rs`), on the one writer.
pub(crate) const DRAW_EVENT_IDS: &str =
    "UPDATE sqlite_sequence SET seq = seq + $1 WHERE name = 'job_events' RETURNING seq";
