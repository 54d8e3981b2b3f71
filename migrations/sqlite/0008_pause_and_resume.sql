-- Pause, resume, retry from a step, and the approval gate before publish (SQLite; see the
-- PostgreSQL migration of the same number for what the columns hold).
--
-- SQLite cannot change a CHECK constraint in place, and `status` gains the state
-- `paused`, so the jobs table is rebuilt the way SQLite documents (section 7 of "ALTER
-- TABLE"): a new table, the rows copied, the old one dropped, the new one renamed, its
-- indexes made again. Foreign keys must be off while the old table is dropped, or the drop
-- would cascade into every job's events and artifacts. That pragma is a no-op inside the
-- transaction each migration runs in, so the queue runs SQLite's migrations on a connection
-- that has it off already (`queue/src/migrate.rs`).

CREATE TABLE jobs_new (
    id TEXT PRIMARY KEY NOT NULL,
    job_type TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN
        ('queued', 'running', 'paused', 'awaiting_approval', 'succeeded', 'failed', 'cancelled',
         'dead_letter')),
    priority INTEGER NOT NULL,
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    repository TEXT NOT NULL,
    affinity_key TEXT,
    required_capabilities TEXT NOT NULL
        CHECK (json_valid(required_capabilities) AND json_type(required_capabilities) = 'array'),
    created_by_user_id TEXT,
    attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    next_attempt_at INTEGER NOT NULL,
    claimed_by TEXT,
    lease_expires_at INTEGER,
    cancel_requested_at INTEGER,
    cancel_requested_by_user_id TEXT,
    cancel_reason TEXT,
    result_summary TEXT,
    error_message TEXT,
    started_at INTEGER,
    finished_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    usage TEXT CHECK (usage IS NULL OR (json_valid(usage) AND json_type(usage) = 'object')),
    pause_requested TEXT CHECK (pause_requested IS NULL
        OR (json_valid(pause_requested) AND json_type(pause_requested) = 'object')),
    resume_from TEXT CHECK (resume_from IS NULL
        OR (json_valid(resume_from) AND json_type(resume_from) = 'object')),
    approval TEXT CHECK (approval IS NULL
        OR (json_valid(approval) AND json_type(approval) = 'object')),
    CHECK (status <> 'running' OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL)),
    -- A paused job, or one awaiting approval, holds no lease.
    CHECK (status NOT IN ('paused', 'awaiting_approval') OR lease_expires_at IS NULL)
) STRICT;

INSERT INTO jobs_new (id, job_type, status, priority, payload, repository, affinity_key,
    required_capabilities, created_by_user_id, attempt, max_attempts, next_attempt_at,
    claimed_by, lease_expires_at, cancel_requested_at, cancel_requested_by_user_id,
    cancel_reason, result_summary, error_message, started_at, finished_at, created_at,
    updated_at, usage)
SELECT id, job_type, status, priority, payload, repository, affinity_key,
    required_capabilities, created_by_user_id, attempt, max_attempts, next_attempt_at,
    claimed_by, lease_expires_at, cancel_requested_at, cancel_requested_by_user_id,
    cancel_reason, result_summary, error_message, started_at, finished_at, created_at,
    updated_at, usage
FROM jobs;

DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

-- The indexes of 0001 (jobs_by_type went in 0003), as they were.
CREATE INDEX jobs_claim_order ON jobs (priority DESC, created_at, id) WHERE status = 'queued';
CREATE INDEX jobs_by_status ON jobs (status, id);
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'running';
