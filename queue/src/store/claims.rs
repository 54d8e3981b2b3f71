//! The claim: pick and lease claimable jobs in one statement, with their `job.claimed`
//! events. The one statement each backend writes its own way (`postgres::claims`,
//! `sqlite::claim`); the rules it applies are [`crate::lease::ClaimRequest::accepts`]'s.

use contract::{Job, JobEvent};

use super::claim_sql::ClaimSql;
use super::{Swap, Swapped, postgres, sqlite};
use crate::QueueError;
use crate::store::Database;

impl Database {
    /// Leases up to `claim.limit` jobs and records each claim's `job.claimed` event,
    /// atomically; returns the jobs in claim order, each with its stored event.
    pub(crate) async fn claim_jobs(
        &self,
        claim: &ClaimSql<'_>,
    ) -> Result<Vec<(Job, JobEvent)>, QueueError> {
        match self {
            Database::Postgres(db) => postgres::claim(db, claim).await,
            Database::Sqlite(db) => sqlite::claim(db, claim).await,
        }
    }

    /// PostgreSQL: a completion written as a swap and, if it was written, the same
    /// worker's next claim (one with no repository limit), in one transaction that
    /// concurrent ones share (`postgres/finishes.rs`). Nothing is claimed when the row had
    /// changed.
    pub(crate) async fn finish(
        &self,
        swap: Swap,
        claim: &ClaimSql<'_>,
    ) -> Result<(Swapped, Vec<(Job, JobEvent)>), QueueError> {
        let Database::Postgres(db) = self else {
            unreachable!("a PostgreSQL path; SQLite transitions hold the write lock")
        };
        let claim = postgres::Claim::of(claim);
        db.finishes.write(postgres::Finish { swap, claim }).await
    }
}
