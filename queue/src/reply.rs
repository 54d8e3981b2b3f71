//! The server's comment on the GitHub issue a job came from (`payload.source`). A row is
//! written by the database itself with the job's `job.created` and made due again by its
//! end (migration 0018); replicas lease due rows fenced by the attempt, write the comment
//! (or edit the one written before), and settle the row: see
//! [`Queue::claim_replies`](crate::Queue::claim_replies).

use chrono::{DateTime, Utc};
use contract::JobId;

/// A reply leased for one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub job_id: JobId,
    /// The page of the issue or pull request the comment is on.
    pub issue: String,
    /// The comment written before, which this write edits.
    pub comment_id: Option<u64>,
    /// Moves on each time the job ends: a reply settled under an older one is due again.
    pub version: u64,
    /// Writes in a row that failed.
    pub failures: u32,
    /// This lease, from 1: the fence its end is written under.
    pub attempt: u32,
}

/// What a write left of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replied {
    /// The comment says what there is to say until the job ends: `comment_id` is it.
    Posted {
        comment_id: u64,
        pull: Option<String>,
    },
    /// The comment says how the job ended: nothing more to write.
    Done {
        comment_id: u64,
        pull: Option<String>,
    },
    /// GitHub could not take it: try again at `next_at`.
    Retry { next_at: DateTime<Utc> },
    /// GitHub refused it too often: given up.
    GaveUp,
}
