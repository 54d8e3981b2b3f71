//! The claim: pick and lease claimable jobs in one statement, with their `job.claimed`
//! events. The one statement each backend writes its own way (`postgres::claims`,
//! `sqlite::claim`); the rules it applies are [`crate::lease::ClaimRequest::accepts`]'s.

use chrono::{DateTime, Utc};
use contract::{Job, JobEvent};

use super::{Arg, postgres, sqlite};
use crate::QueueError;
use crate::store::Database;

/// `$1`..`$7` of the claim statements.
pub(super) fn claim_args<'a>(claim: &'a ClaimSql<'a>) -> Result<Vec<Arg<'a>>, sqlx::Error> {
    Ok(vec![
        Arg::text(claim.worker_id),
        Arg::at(claim.lease_until),
        Arg::at(claim.now),
        Arg::json(&claim.capabilities)?,
        Arg::TextList(claim.allowed_types),
        Arg::TextList(claim.allowed_repositories),
        Arg::BigInt(i64::from(claim.limit)),
    ])
}

/// The order claims take jobs in: highest priority, then oldest, then id.
pub(super) fn claim_order(a: &Job, b: &Job) -> std::cmp::Ordering {
    (b.priority, a.created_at, &a.id).cmp(&(a.priority, b.created_at, &b.id))
}

/// The inputs of the claim statement.
pub(crate) struct ClaimSql<'a> {
    pub worker_id: &'a str,
    pub capabilities: &'a [String],
    pub allowed_types: Option<&'a [String]>,
    pub allowed_repositories: Option<&'a [String]>,
    pub now: DateTime<Utc>,
    pub lease_until: DateTime<Utc>,
    pub limit: u32,
    /// Skip the jobs of a repository with this many jobs running already; `None`: no limit.
    pub repository_limit: Option<u32>,
}

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
