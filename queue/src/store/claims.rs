//! The claim: pick and lease claimable jobs in one statement, with their `job.claimed`
//! events. The one statement each backend writes its own way (`postgres::claims`,
//! `sqlite::claim`); the rules it applies are [`crate::lease::ClaimRequest::accepts`]'s.

use contract::{Job, JobEvent};

use super::claim_sql::ClaimSql;
use super::{postgres, sqlite};
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
}
