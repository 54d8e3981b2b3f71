//! [`Queue`]: the one service layer over the store. REST handlers, server functions and MCP
//! tools call its methods and nothing below them. One file per concern, each with its own
//! `impl Queue` block; `write` holds how every transition reaches the store.

mod artifacts;
mod claims;
mod dependencies;
mod events;
mod finishes;
mod follow;
mod jobs;
mod lifecycle;
mod outbox;
mod pauses;
mod replies;
mod retention;
mod rounds;
mod schedules;
#[cfg(feature = "seed")]
mod seed;
mod sessions;
mod sourced;
mod tokens;
mod vacuum;
mod watches;
mod workers;
mod write;

pub use dependencies::Edges;
pub use follow::EventFollower;

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

pub use jobs::{JobFilter, JobPage};

use crate::config::QueueConfig;
use crate::error::QueueError;
use crate::last_written::LastWritten;
use crate::migrate::{self, NotReady};

/// `at` at the millisecond precision both backends store, so a row reads back as written.
pub(crate) fn stored(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// How long a readiness probe waits for the database: less than a probe's usual timeout.
pub const READINESS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
use crate::notify::{Notification, Notifier};
use crate::store::{Database, PgDb};
use crate::waiters::Waiters;
use crate::workers::SeenCache;

/// The queue service. Cheap to clone; clones share one store, notifier and config.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    config: QueueConfig,
    notifier: Notifier,
    /// PostgreSQL only: rows this replica just wrote, the guess its transitions start from.
    last_written: Option<LastWritten>,
    /// Idle `claim_wait` callers, woken one per available job.
    waiters: Waiters,
    /// Worker sightings this replica wrote lately.
    seen: SeenCache,
    /// The job readers that watchers of a job's timeline share ([`Queue::follow_events`]).
    readers: follow::Readers,
    /// Claims under a limit per repository take turns on this replica first, so that at
    /// most one of them waits on the database's turn (`store::claims`) holding a connection.
    claim_turn: tokio::sync::Mutex<()>,
    /// Stops the PostgreSQL listener task when the last clone of the queue is dropped.
    _listener: DropGuard,
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("backend", &self.inner.db.backend())
            .field("origin", &self.inner.notifier.origin)
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// Wraps an open database. On PostgreSQL this also starts listening for other
    /// replicas' notifications, and returns only once LISTEN is in place.
    pub async fn open(db: Database, config: QueueConfig) -> Result<Queue, QueueError> {
        let mut notifier = Notifier::new();
        let stop = CancellationToken::new();
        if let Database::Postgres(PgDb { pool, .. }) = &db {
            notifier.listen_postgres(pool, stop.clone()).await?;
            notifier = notifier.relay_postgres(pool.clone(), stop.clone());
        }
        let waiters = Waiters::default();
        waiters.clone().follow(notifier.subscribe(), stop.clone());
        Ok(Queue {
            inner: Arc::new(Inner {
                last_written: matches!(db, Database::Postgres(_)).then(LastWritten::default),
                waiters,
                seen: SeenCache::default(),
                readers: follow::Readers::default(),
                claim_turn: tokio::sync::Mutex::new(()),
                db,
                config,
                notifier,
                _listener: stop.drop_guard(),
            }),
        })
    }

    /// Tells the observers of events this replica stored for `job`.
    pub(crate) fn observe<'e>(
        &self,
        job: &contract::Job,
        events: impl IntoIterator<Item = (&'e str, &'e serde_json::Map<String, serde_json::Value>)>,
    ) {
        let observers = &self.inner.config.observers;
        if observers.is_empty() {
            return;
        }
        for (kind, payload) in events {
            for observer in observers {
                observer.recorded(job, kind, payload);
            }
        }
    }

    /// Brings the schema up to date (embedded migrations; idempotent).
    pub async fn migrate(&self) -> Result<(), QueueError> {
        Ok(migrate::run(&self.inner.db).await?)
    }

    /// Whether this replica can serve: the database answers, within
    /// [`READINESS_TIMEOUT`], and holds exactly the schema this build applies.
    pub async fn readiness(&self) -> Result<(), NotReady> {
        tokio::time::timeout(READINESS_TIMEOUT, migrate::readiness(&self.inner.db))
            .await
            .unwrap_or_else(|_| {
                tracing::warn!("readiness: the database did not answer in time");
                Err(NotReady::Unreachable)
            })
    }

    pub fn database(&self) -> &Database {
        &self.inner.db
    }

    pub fn config(&self) -> &QueueConfig {
        &self.inner.config
    }

    /// Every change committed from now on, by this replica or (PostgreSQL) any other.
    pub fn subscribe(&self) -> broadcast::Receiver<Notification> {
        self.inner.notifier.subscribe()
    }

    /// The queue's clock, at the millisecond precision both backends store.
    pub fn now(&self) -> DateTime<Utc> {
        stored(self.inner.config.clock.now())
    }
}
