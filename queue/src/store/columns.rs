//! The column lists of the statements that read and write a job, its events, artifacts
//! and tokens, as macros so that every statement is one string known at compile time. A
//! job is read from its row and its live row (`live.rs`), whichever holds a column now.

/// A job's column that its live row holds while the job is queued or leased (`live.rs`),
/// read from whichever row has it: `j` is the job's row and `q` its live row, as
/// [`job_from!`] joins them.
macro_rules! live {
    ($column:literal) => {
        concat!(
            "CASE WHEN q.id IS NULL THEN j.",
            $column,
            " ELSE q.",
            $column,
            " END"
        )
    };
}

/// Where a job is read from: its row, and its live row while it has one.
macro_rules! job_from {
    () => {
        "jobs j LEFT JOIN job_queue q ON q.id = j.id"
    };
}

/// A job as `job_from_row!` reads it, from the rows of [`job_from!`].
macro_rules! job_columns {
    () => {
        concat!(
            "j.id AS id, j.job_type AS job_type, ",
            live!("status"),
            " AS status, j.priority AS priority, j.payload AS payload, \
             j.affinity_key AS affinity_key, j.required_capabilities AS required_capabilities, \
             j.created_by_user_id AS created_by_user_id, ",
            live!("attempt"),
            " AS attempt, j.max_attempts AS max_attempts, ",
            live!("next_attempt_at"),
            " AS next_attempt_at, ",
            live!("claimed_by"),
            " AS claimed_by, ",
            live!("lease_expires_at"),
            " AS lease_expires_at, j.cancel_requested_at AS cancel_requested_at, \
             j.cancel_requested_by_user_id AS cancel_requested_by_user_id, \
             j.cancel_reason AS cancel_reason, j.result_summary AS result_summary, \
             j.error_message AS error_message, ",
            live!("started_at"),
            " AS started_at, j.finished_at AS finished_at, j.created_at AS created_at, ",
            live!("updated_at"),
            " AS updated_at, j.usage AS usage, j.pause_requested AS pause_requested, \
             j.resume_from AS resume_from, j.approval AS approval"
        )
    };
}

/// What of its timeline a job's rows keep (`kept.rs`), read beside `job_columns!`: the
/// claim in the live row while there is one.
macro_rules! kept_columns {
    () => {
        concat!(
            live!("claimed_event_id"),
            " AS claimed_event_id, ",
            live!("claimed_at"),
            " AS claimed_at, ",
            live!("claim_lease_until"),
            " AS claim_lease_until, j.completed_event_id AS completed_event_id"
        )
    };
}

macro_rules! event_columns {
    () => {
        "id, job_id, kind, level, message, payload, created_at"
    };
}

macro_rules! artifact_columns {
    () => {
        "id, job_id, name, size, content_type, sha256, created_at"
    };
}

macro_rules! token_columns {
    () => {
        "id, name, kind, role, token_hash, token_prefix, capabilities, allowed_repositories, \
         allowed_job_types, created_at, last_used_at, revoked_at"
    };
}

/// The columns of `jobs::state_args` come first, in its order, so both writes share it.
macro_rules! insert_job_sql {
    () => {
        "INSERT INTO jobs (id, status, attempt, next_attempt_at, claimed_by, \
         lease_expires_at, cancel_requested_at, cancel_requested_by_user_id, cancel_reason, \
         result_summary, error_message, started_at, finished_at, updated_at, job_type, \
         priority, payload, affinity_key, required_capabilities, created_by_user_id, \
         max_attempts, created_at, repository) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)"
    };
}
