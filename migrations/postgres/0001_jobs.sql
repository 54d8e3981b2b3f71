-- The queue's jobs, their event timelines and their artifact metadata (PostgreSQL).
--
-- Conventions of this backend: ids are uuid (UUIDv7, so byte order is creation order),
-- timestamps are timestamptz (the queue writes millisecond precision), JSON is jsonb.
-- Statuses are text with a CHECK rather than an enum type: adding a state later is then a
-- plain constraint change instead of ALTER TYPE, which cannot run inside a transaction on
-- older servers.

-- One row per job: the normalized task plus the state machine's bookkeeping. The column
-- set mirrors contract::Job; `repository` is copied out of the payload so the claim can
-- filter on it without digging into jsonb.
CREATE TABLE jobs (
    id uuid PRIMARY KEY,
    job_type text NOT NULL,
    status text NOT NULL CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'dead_letter')),
    priority integer NOT NULL,
    payload jsonb NOT NULL,
    repository text NOT NULL,
    affinity_key text,
    -- A jsonb array, so the claim can test "required ⊆ offered" with `<@`.
    required_capabilities jsonb NOT NULL CHECK (jsonb_typeof(required_capabilities) = 'array'),
    created_by_user_id text,
    -- How many times the job was claimed; the fence of every worker write.
    attempt integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts integer NOT NULL CHECK (max_attempts >= 1),
    -- Not claimable before this instant: the retry backoff.
    next_attempt_at timestamptz NOT NULL,
    claimed_by text,
    lease_expires_at timestamptz,
    cancel_requested_at timestamptz,
    cancel_requested_by_user_id text,
    cancel_reason text,
    result_summary text,
    error_message text,
    started_at timestamptz,
    finished_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- A running job always has an owner and a lease; anything else is a bug worth a failed write.
    CHECK (status <> 'running' OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- The claim: queued jobs in claim order (priority, then oldest). Partial, so it holds only
-- the jobs waiting, however long the history grows; FOR UPDATE SKIP LOCKED walks it and
-- skips rows other claimers are taking.
CREATE INDEX jobs_claim_order ON jobs (priority DESC, created_at, id) WHERE status = 'queued';

-- Keyset listing newest first, filtered by state or by type (the unfiltered listing walks
-- the primary key backwards).
CREATE INDEX jobs_by_status ON jobs (status, id);
CREATE INDEX jobs_by_type ON jobs (job_type, id);

-- The lease rescuer: running jobs by lease expiry.
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'running';

-- Each job's timeline. The id is the cursor of event streams (SSE resumes after the last
-- id it sent). Sequence values are handed out at insert, not at commit, so the queue
-- serializes event-inserting transactions with an advisory lock to make ids visible in
-- order (see queue/src/store/mod.rs, Tx::insert_event).
CREATE TABLE job_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    kind text NOT NULL,
    level text NOT NULL CHECK (level IN ('info', 'warn', 'error')),
    message text NOT NULL,
    payload jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at timestamptz NOT NULL
);

-- A job's events in order, from a cursor.
CREATE INDEX job_events_by_job ON job_events (job_id, id);

-- Metadata of the files workers store for a job; the bytes live on disk under
-- {artifacts_dir}/{job_id}/{name}. One row per name: uploading a name again replaces it,
-- and the unique index also serves listing a job's artifacts.
CREATE TABLE artifacts (
    id uuid PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name text NOT NULL,
    size bigint NOT NULL CHECK (size >= 0),
    content_type text NOT NULL,
    sha256 text NOT NULL,
    created_at timestamptz NOT NULL,
    UNIQUE (job_id, name)
);
