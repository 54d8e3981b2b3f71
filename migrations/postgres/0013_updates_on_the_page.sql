-- jobs rebuilt so that PostgreSQL writes less for each transition. Read with pg_waldump
-- (`stepwise bench queue --peer graphile-worker`), each claim and each completion logged
-- the job's whole new row, task included: about 800 of a job's 3,100 WAL bytes per update.
--
-- PostgreSQL logs only the changed middle of a new row version, not its unchanged first
-- and last bytes, but only when the new version lands on the same page as the old one
-- (heapam.c, log_heap_update). Two things make that the usual case:
-- 1. the columns in the order they change: first those fixed when the job is created (the
--    task among them), then those a transition writes, then retention's marks, so that the
--    unchanged prefix covers the task;
-- 2. a fillfactor of 70: inserts leave 30 % of each page free for the next versions of its
--    rows (and a heartbeat, which changes no indexed column, needs that room to be a HOT
--    update at all).
-- Every column, default, constraint and index is kept as it was; statements name their
-- columns, so none depends on the order.

CREATE TABLE jobs_new (
    -- Fixed at creation.
    id uuid NOT NULL,
    created_at timestamptz NOT NULL,
    priority integer NOT NULL,
    max_attempts integer NOT NULL,
    job_type text NOT NULL,
    repository text NOT NULL,
    affinity_key text,
    created_by_user_id text,
    required_capabilities jsonb NOT NULL,
    payload jsonb NOT NULL,
    -- Written by transitions.
    status text NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    claimed_by text,
    lease_expires_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    result_summary text,
    error_message text,
    cancel_requested_at timestamptz,
    cancel_requested_by_user_id text,
    cancel_reason text,
    pause_requested jsonb,
    resume_from jsonb,
    approval jsonb,
    usage jsonb,
    -- Written by retention, once a job has finished.
    history_deleted_at timestamptz,
    logs_compacted_at timestamptz
) WITH (fillfactor = 70);

INSERT INTO jobs_new (id, created_at, priority, max_attempts, job_type, repository,
    affinity_key, created_by_user_id, required_capabilities, payload, status, attempt,
    updated_at, next_attempt_at, claimed_by, lease_expires_at, started_at, finished_at,
    result_summary, error_message, cancel_requested_at, cancel_requested_by_user_id,
    cancel_reason, pause_requested, resume_from, approval, usage, history_deleted_at,
    logs_compacted_at)
SELECT id, created_at, priority, max_attempts, job_type, repository,
    affinity_key, created_by_user_id, required_capabilities, payload, status, attempt,
    updated_at, next_attempt_at, claimed_by, lease_expires_at, started_at, finished_at,
    result_summary, error_message, cancel_requested_at, cancel_requested_by_user_id,
    cancel_reason, pause_requested, resume_from, approval, usage, history_deleted_at,
    logs_compacted_at
FROM jobs;

-- The one reference to jobs (job_events has none since 0011) goes with the old table and
-- comes back on the new one.
ALTER TABLE artifacts DROP CONSTRAINT artifacts_job_id_fkey;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

ALTER TABLE jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);
-- As 0012 left it: a running job has an owner and a lease; a paused job, or one awaiting
-- approval, holds none.
ALTER TABLE jobs ADD CONSTRAINT jobs_lease_matches_status CHECK (
    (status <> 'running' OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))
    AND (status NOT IN ('paused', 'awaiting_approval') OR lease_expires_at IS NULL));
CREATE INDEX jobs_claim_order ON jobs (priority DESC, created_at, id) WHERE status = 'queued';
CREATE INDEX jobs_by_status ON jobs (status, id);
CREATE INDEX jobs_running_by_repository ON jobs (repository) WHERE status = 'running';
CREATE INDEX jobs_history_kept ON jobs (finished_at, id)
    WHERE finished_at IS NOT NULL
      AND (history_deleted_at IS NULL OR history_deleted_at <= finished_at);
ALTER TABLE artifacts ADD CONSTRAINT artifacts_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
