//! What both backends' claim statements share: their inputs, their first arguments and the
//! order they take jobs in. A leaf: the dispatcher (`claims.rs`) and each backend's
//! statement (`postgres::claims`, `sqlite::claim`) use it, and it uses none of them.

use chrono::{DateTime, Utc};
use contract::Job;

use super::Arg;

/// `$1`..`$7` of the claim statements.
pub(in crate::store) fn claim_args<'a>(
    claim: &'a ClaimSql<'a>,
) -> Result<Vec<Arg<'a>>, sqlx::Error> {
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
pub(in crate::store) fn claim_order(a: &Job, b: &Job) -> std::cmp::Ordering {
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
