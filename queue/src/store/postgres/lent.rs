//! A connection a committer's line lends its statements (`committer.rs`): the one its last
//! statement ran on, kept out of the pool. sqlx tests every connection given back to its
//! pool with a round trip of its own (a `Sync` and its `ReadyForQuery`), which woke the
//! server once more for every claim and every completion and held the connection until the
//! answer came.

use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};

use crate::QueueError;

/// A connection of the line's pool, lent to one statement: the one a statement before it
/// gave back, or one from the pool the first time the statement asks.
pub(crate) struct Lent {
    pool: PgPool,
    conn: Option<Held>,
}

/// A pooled connection out of its pool, and since when.
pub(super) struct Held {
    conn: PoolConnection<Postgres>,
    /// When it left the pool: a line gives it back after [`KEPT_LIFETIME`].
    taken: Instant,
    /// When its last statement ended.
    idle_since: Instant,
}

/// How long a line keeps a connection no statement uses. One idle longer goes back to
/// the pool, which closes what stays idle there for ten minutes, so that a line does not
/// use a connection the server, or a proxy on the way, may have dropped meanwhile.
const KEPT_IDLE: Duration = Duration::from_secs(60);

/// How long a line keeps a connection at all: the pool's own bound on a connection's life
/// (sqlx's default `max_lifetime`), which it applies when one comes back.
const KEPT_LIFETIME: Duration = Duration::from_secs(30 * 60);

impl Lent {
    /// A connection of `pool` for a test's statements, outside any line.
    #[cfg(test)]
    pub(crate) fn of(pool: &PgPool) -> Lent {
        Lent::new(pool.clone(), None)
    }

    pub(super) fn new(pool: PgPool, conn: Option<Held>) -> Lent {
        Lent { pool, conn }
    }

    /// The connection, if the statement took one and it is still good.
    pub(super) fn into_held(self) -> Option<Held> {
        self.conn
    }

    /// Runs `statement` on the lent connection. One whose statement failed goes back to
    /// the pool at once, which tests it (reading what the statement left unread, and
    /// sending the `ROLLBACK` of a transaction it left) and closes it if it is broken;
    /// what the line runs next, a batch's writes one by one, takes another.
    pub(crate) async fn run<T>(
        &mut self,
        statement: impl AsyncFnOnce(&mut PgConnection) -> Result<T, QueueError>,
    ) -> Result<T, QueueError> {
        let mut held = match self.conn.take() {
            Some(held) => held,
            None => Held {
                conn: self.pool.acquire().await?,
                taken: Instant::now(),
                idle_since: Instant::now(),
            },
        };
        let answer = statement(&mut held.conn).await;
        if answer.is_ok() {
            self.conn = Some(held);
        }
        answer
    }
}

/// The connections a line keeps, at most one per statement it may run at once.
#[derive(Default)]
pub(super) struct Kept(Vec<Held>);

impl Kept {
    /// The connection kept last, if one is, and those idle or out of the pool too long,
    /// for the caller to give back to the pool (which tests them).
    pub(super) fn take(&mut self) -> (Option<Held>, Vec<Held>) {
        let (fresh, stale): (Vec<Held>, Vec<Held>) = self.0.drain(..).partition(|held| {
            held.idle_since.elapsed() <= KEPT_IDLE && held.taken.elapsed() <= KEPT_LIFETIME
        });
        self.0 = fresh;
        (self.0.pop(), stale)
    }

    /// Keeps `held` if fewer than `room` are kept; else hands it back.
    pub(super) fn give_back(&mut self, mut held: Held, room: usize) -> Option<Held> {
        if self.0.len() >= room {
            return Some(held);
        }
        held.idle_since = Instant::now();
        self.0.push(held);
        None
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        // A pooled connection goes back to its pool on a task of the runtime; with no
        // runtime left (it is shutting down) it is closed here instead.
        if tokio::runtime::Handle::try_current().is_err() {
            for held in self.0.drain(..) {
                drop(held.conn.detach());
            }
        }
    }
}
