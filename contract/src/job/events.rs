//! The kinds of the events the queue appends for its own transitions. Workers may not
//! append kinds with the `job.` prefix, so these always tell what the queue did.

pub const JOB_CREATED: &str = "job.created";
pub const JOB_CLAIMED: &str = "job.claimed";
pub const JOB_COMPLETED: &str = "job.completed";
pub const JOB_FAILED: &str = "job.failed";
pub const JOB_RETRY_SCHEDULED: &str = "job.retry_scheduled";
pub const JOB_DEAD_LETTERED: &str = "job.dead_lettered";
pub const JOB_CANCEL_REQUESTED: &str = "job.cancel_requested";
pub const JOB_CANCELLED: &str = "job.cancelled";
pub const JOB_LEASE_EXPIRED: &str = "job.lease_expired";
pub const JOB_PAUSE_REQUESTED: &str = "job.pause_requested";
pub const JOB_PAUSED: &str = "job.paused";
pub const JOB_RESUMED: &str = "job.resumed";
pub const JOB_RETRY_REQUESTED: &str = "job.retry_requested";
pub const JOB_APPROVAL_REQUESTED: &str = "job.approval_requested";
pub const JOB_APPROVED: &str = "job.approved";
pub const JOB_REJECTED: &str = "job.rejected";
pub const JOB_STEPS_APPENDED: &str = "job.steps_appended";
/// The job's usage reached a limit of its budget; it pauses (`pauseReason: "budget"`).
pub const JOB_BUDGET_EXCEEDED: &str = "job.budget_exceeded";
/// An operator set the job's budget.
pub const JOB_BUDGET_CHANGED: &str = "job.budget_changed";
/// An operator followed up on the ended job: its next round is queued (`round`,
/// `fromStepIndex`, `resumeFrom`, `requestedBy`).
pub const JOB_FOLLOW_UP_REQUESTED: &str = "job.follow_up_requested";
/// The job's pull request has feedback (a failed check, a review asking for changes) that
/// no more rounds of its own will take (`maxRounds` reached, or the server cannot read it):
/// a person is asked to look (`reason`, `pullRequest`, `rounds`).
pub const JOB_NEEDS_ATTENTION: &str = "job.needs_attention";
/// The server posted the job's end (or its wait for approval) to a webhook, which took it.
pub const JOB_NOTIFICATION_DELIVERED: &str = "job.notification_delivered";
/// A webhook did not take it: the attempt's status or error, and whether it is tried again.
pub const JOB_NOTIFICATION_FAILED: &str = "job.notification_failed";
/// Retention deleted the finished job's events and artifacts (this event stays, and says so).
pub const JOB_HISTORY_DELETED: &str = "job.history_deleted";

/// The kinds a job ends with (the job is then in a terminal state, but for a failure that is
/// retried, which `job.retry_scheduled` follows): done, failed, dead-lettered, cancelled,
/// or its changes rejected at the approval gate.
pub const ENDINGS: [&str; 5] = [
    JOB_COMPLETED,
    JOB_FAILED,
    JOB_DEAD_LETTERED,
    JOB_CANCELLED,
    JOB_REJECTED,
];

/// The prefix reserved for the kinds above.
pub const RESERVED_PREFIX: &str = "job.";

pub const ALL: [&str; 24] = [
    JOB_CREATED,
    JOB_CLAIMED,
    JOB_COMPLETED,
    JOB_FAILED,
    JOB_RETRY_SCHEDULED,
    JOB_DEAD_LETTERED,
    JOB_CANCEL_REQUESTED,
    JOB_CANCELLED,
    JOB_LEASE_EXPIRED,
    JOB_PAUSE_REQUESTED,
    JOB_PAUSED,
    JOB_RESUMED,
    JOB_RETRY_REQUESTED,
    JOB_APPROVAL_REQUESTED,
    JOB_APPROVED,
    JOB_REJECTED,
    JOB_STEPS_APPENDED,
    JOB_BUDGET_EXCEEDED,
    JOB_BUDGET_CHANGED,
    JOB_FOLLOW_UP_REQUESTED,
    JOB_NEEDS_ATTENTION,
    JOB_NOTIFICATION_DELIVERED,
    JOB_NOTIFICATION_FAILED,
    JOB_HISTORY_DELETED,
];
