//! The pull requests watched for their jobs' feedback (`task.publish.feedback`). A row is
//! written by the database itself when a completion that wants one is stored (migration
//! 0017); replicas lease due rows fenced by the attempt, read the pull request, and either
//! look again later or end the watch: see [`Queue::claim_watches`](crate::Queue::claim_watches).

use chrono::{DateTime, Utc};
use contract::JobId;

/// A watch leased for one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    pub job_id: JobId,
    /// The pull request's address, once a look read it.
    pub pull: Option<String>,
    /// Looks in a row that found nothing to do.
    pub quiet: u32,
    /// This lease, from 1: the fence its end is written under.
    pub attempt: u32,
}

/// What a look leaves of a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Looked {
    /// Look again at `next_at`; `quiet` looks in a row found nothing; `pull`, the address.
    Later {
        next_at: DateTime<Utc>,
        quiet: u32,
        pull: Option<String>,
    },
    /// The pull request is closed or merged, or the job is gone on: nothing more to watch.
    Closed,
    /// Feedback waits that no round of the job's own will take: a person looks.
    NeedsAttention,
}
