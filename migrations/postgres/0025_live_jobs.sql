-- Issue 39, step 2: a job lives in a narrow `job_queue` row while it is queued or leased.
-- The claim updates only that row and its two partial indexes; a job's end deletes it
-- (fenced by what it held) and writes the job's row once, an update that no index of
-- `jobs` sees change, so PostgreSQL can write it on the row's own page with no index entry
-- (HOT). While the live row exists its columns are the job's state, and the job's own
-- columns of the same names are left as they were last written: readers take the live
-- row's (`store/live.rs`). The columns copied from the job (priority, creation, type,
-- repository, capabilities) never change, and are what the claim orders and filters by.
CREATE TABLE job_queue (
    id uuid NOT NULL,
    priority integer NOT NULL,
    created_at timestamptz NOT NULL,
    job_type text NOT NULL,
    repository text NOT NULL,
    required_capabilities jsonb NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    -- What a claim writes, last: PostgreSQL logs only an update's changed middle.
    status text NOT NULL,
    attempt integer NOT NULL,
    updated_at timestamptz NOT NULL,
    started_at timestamptz,
    claimed_by text,
    lease_expires_at timestamptz,
    -- The kept `job.claimed` (0022), here while the job lives, moved to its row at its end.
    claimed_event_id bigint,
    claimed_at timestamptz,
    claim_lease_until timestamptz,
    CONSTRAINT job_queue_pkey PRIMARY KEY (id),
    -- Checked once, when the live row is made; a job's row never goes while it is live.
    CONSTRAINT job_queue_job FOREIGN KEY (id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT job_queue_live CHECK (status = 'queued'
        OR (status = 'running' AND claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))
) WITH (fillfactor = 70);

-- The claim's order among the jobs waiting, and the running jobs in the list's order (the
-- repository limit counts them; the rescuer looks for lost leases among them).
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

-- No index of `jobs` may name a column a job's end changes. The claim's indexes moved to
-- `job_queue`; the list's filter on the states a list finds few of reads a generated
-- column that is NULL for the live states and for success, so that neither a claim nor a
-- success changes it (HOT compares an indexed column's value, not what it is made of).
DROP INDEX jobs_claim_order;
DROP INDEX jobs_running;
DROP INDEX jobs_listed_apart;
ALTER TABLE jobs ADD COLUMN listed_state text GENERATED ALWAYS AS (
    CASE WHEN status IN ('paused', 'awaiting_approval', 'failed', 'cancelled', 'dead_letter')
    THEN status END) STORED;
CREATE INDEX jobs_listed_apart ON jobs (listed_state, id) WHERE listed_state IS NOT NULL;
