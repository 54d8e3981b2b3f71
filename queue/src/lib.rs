//! The queue engine: where jobs are stored and moved between states, behind one store
//! interface with two backends (SQLite embedded, PostgreSQL for many nodes).
//! It knows nothing of HTTP, pages or agents; the server and the UI call into it.
//!
//! # Shape
//!
//! [`Queue`] is the one service the REST API, the server functions and MCP call. Every
//! state change is a guarded, named operation (`claim`, `heartbeat`, `complete`, `fail`,
//! `request_cancel`, `ack_cancel`, the [`Rescuer`]'s lease expiry) that checks its guard
//! on a locked row, writes the row and appends its `job.*` event in one transaction, then
//! publishes [`Notification`]s (in-process broadcast; on PostgreSQL also LISTEN/NOTIFY, so
//! other replicas hear them too).
//!
//! A worker's writes carry a [`Fence`] (worker id + attempt): once its lease has been taken
//! back, every write it tries is refused, so two workers can never both finish a job.
//!
//! # Backends
//!
//! The two backends are an enum ([`Database`]), not a trait: there are exactly two, known
//! at compile time, and an enum keeps the code free of boxed futures and generic bounds.
//! The state machine itself is written once, in Rust, on a row locked inside a transaction
//! (`SELECT … FOR UPDATE` on PostgreSQL, `BEGIN IMMEDIATE` on SQLite); only the claim,
//! which must pick and take a row in one statement, is written twice.
//!
//! # Decisions
//!
//! - **Time** comes from the [`Clock`] in [`QueueConfig`] (tests move a [`ManualClock`]),
//!   truncated to milliseconds so both backends store exactly the same instants.
//! - **Attempts** count claims. A retry or a lease expiry keeps the attempt; the next claim
//!   increments it. Retries wait `retry_base × 2^(attempt-1)`, capped at `retry_cap`.
//! - **`claimedBy`** is cleared when a job is requeued or cancelled (the lease is gone) and
//!   kept on succeeded, failed and dead_letter as the record of who ran it.
//! - **Fence errors**: a finished job answers StateConflict; a queued job, another worker's
//!   lease or an older attempt answers OwnershipMismatch.
//! - **Idempotent repeats** (retried HTTP calls): `request_cancel` on a cancelled job or a
//!   running job already marked, `ack_cancel` by the worker whose own call cancelled it, and
//!   `complete` by the worker and attempt that completed it all return the job unchanged.
//! - **Handoff**: a job created while a claimer on this replica long-polls for work it may
//!   run is stored already leased to that claimer (`job.created` then `job.claimed`, in one
//!   write) and handed to it; `create_job` then answers the running job. One commit from
//!   submit to start instead of two (see `waiters`).
//! - **Heartbeats are silent**: they move the lease only, so they append no event and send
//!   no notification (the UI would otherwise redraw every few seconds per running job).
//! - **Artifacts** send no notification either; their list is read when a page asks.

mod artifacts;
mod clock;
mod config;
mod dependencies;
mod error;
mod every;
mod last_written;
mod lease;
mod machine;
mod migrate;
mod notify;
mod observer;
mod outbox;
mod recurring;
mod reply;
mod rescuer;
mod retention;
mod scratch;
mod service;
mod store;
mod tokens;
mod vacuum;
mod waiters;
mod watch;
mod workers;

pub use artifacts::{ArtifactContent, Incoming};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::QueueConfig;
pub use contract::job::events;
pub use dependencies::{Resolver, ResolverConfig};
pub use error::{Entity, QueueError};
pub use lease::{ClaimRequest, Completion, Fence, MAX_CLAIM_BATCH};
pub use migrate::NotReady;
pub use notify::{Notification, NotificationKind};
pub use observer::Observer;
pub use outbox::{Notice, Settled};
pub use recurring::{Cadence, Scheduler, SchedulerConfig};
pub use reply::{Replied, Reply};
pub use rescuer::{RescueReport, Rescuer, RescuerConfig};
pub use retention::{Retention, RetentionConfig, RetentionReport};
pub use scratch::ScratchPostgres;
pub use service::{Edges, EventFollower, JobFilter, JobPage, Queue, READINESS_TIMEOUT};
pub use store::{Database, DatabaseError, PgDb, SQLITE_FILE, SqliteDb};
pub use tokens::{NewToken, Role, SessionPurpose, TokenKind, TokenRecord};
pub use vacuum::{Vacuum, VacuumConfig, VacuumReport};
pub use watch::{Looked, Watch};
pub use workers::{LIVE_FOR, Sighting, WorkerRecord, missing_capabilities};
