-- A job lives in a narrow `job_queue` row while it is queued or leased (issue 39); see the
-- PostgreSQL migration of the same number. The same schema through the same store: the
-- claim writes only the live row, a job's end deletes it and writes the job's row.
CREATE TABLE job_queue (
    id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    priority INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    job_type TEXT NOT NULL,
    repository TEXT NOT NULL,
    required_capabilities TEXT NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    started_at INTEGER,
    claimed_by TEXT,
    lease_expires_at INTEGER,
    claimed_event_id INTEGER,
    claimed_at INTEGER,
    claim_lease_until INTEGER,
    CHECK (status = 'queued'
        OR (status = 'running' AND claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))
) STRICT;

-- The key under PostgreSQL's name, which the list of queued jobs names (INDEXED BY):
-- SQLite would rather sort the claim order's index.
CREATE UNIQUE INDEX job_queue_pkey ON job_queue (id);
CREATE INDEX job_queue_claim_order ON job_queue (priority DESC, created_at, id)
    WHERE status = 'queued';
CREATE INDEX job_queue_running ON job_queue (id, repository) WHERE status = 'running';

INSERT INTO job_queue (id, priority, created_at, job_type, repository,
    required_capabilities, next_attempt_at, status, attempt, updated_at, started_at,
    claimed_by, lease_expires_at, claimed_event_id, claimed_at, claim_lease_until)
SELECT id, priority, created_at, job_type, repository, required_capabilities,
    next_attempt_at, status, attempt, updated_at, started_at, claimed_by, lease_expires_at,
    claimed_event_id, claimed_at, claim_lease_until
FROM jobs WHERE status IN ('queued', 'running');
UPDATE jobs SET claimed_event_id = NULL, claimed_at = NULL, claim_lease_until = NULL
WHERE status IN ('queued', 'running') AND claimed_event_id IS NOT NULL;

DROP INDEX jobs_claim_order;
DROP INDEX jobs_running;
DROP INDEX jobs_listed_apart;
DROP INDEX jobs_lease_expiry;
ALTER TABLE jobs ADD COLUMN listed_state TEXT GENERATED ALWAYS AS (
    CASE WHEN status IN ('paused', 'awaiting_approval', 'failed', 'cancelled', 'dead_letter')
    THEN status END) VIRTUAL;
CREATE INDEX jobs_listed_apart ON jobs (listed_state, id) WHERE listed_state IS NOT NULL;
