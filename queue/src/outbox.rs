//! The webhook outbox: the notifications of jobs' ends (and of their waits for approval)
//! still to be posted. A row is written by the database itself, in the transaction that
//! stored the event it tells of (migration 0015), so no end goes untold however a write
//! was made or a replica stopped. Replicas claim rows with a lease fenced by the attempt,
//! post them, and settle them: see [`Queue::claim_notifications`](crate::Queue::claim_notifications).

use chrono::{DateTime, Utc};
use contract::{JobId, JobState};

/// A notification claimed for one try.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The outbox row.
    pub id: i64,
    pub job_id: JobId,
    /// The event it tells of.
    pub event_id: i64,
    /// What it is posted as: one of `contract::api::webhook::EVENTS`.
    pub event: String,
    /// The job's state as that event left it.
    pub status: JobState,
    /// This try, from 1: every earlier claim counts, whoever made it.
    pub attempt: u32,
    /// The keys of the webhooks it is done with.
    pub settled: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// What a try leaves of a notification.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// Every webhook is done with: the row goes.
    Done,
    /// Tried again at `next_at`, for the webhooks not in `settled`.
    Later {
        settled: Vec<String>,
        next_at: DateTime<Utc>,
    },
}
