-- The queue's jobs, their event timelines and their artifact metadata (SQLite).
--
-- Conventions of this backend:
-- * ids are UUIDv7 as lowercase hyphenated TEXT: text order is creation order, and an
--   operator can paste an id from the UI into the sqlite3 shell;
-- * timestamps are INTEGER Unix milliseconds (UTC): they compare in time order, which the
--   claim and the lease rescuer rely on (RFC 3339 text of varying width would not);
-- * JSON is TEXT checked with json_valid, so a bad write fails loudly;
-- * STRICT tables refuse a value of the wrong type instead of silently storing it.

-- One row per job: the normalized task plus the state machine's bookkeeping. The column
-- set mirrors contract::Job; `repository` is copied out of the payload so the claim can
-- filter on it without parsing JSON per row.
CREATE TABLE jobs (
    id TEXT PRIMARY KEY NOT NULL,
    job_type TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'dead_letter')),
    priority INTEGER NOT NULL,
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    repository TEXT NOT NULL,
    affinity_key TEXT,
    required_capabilities TEXT NOT NULL
        CHECK (json_valid(required_capabilities) AND json_type(required_capabilities) = 'array'),
    created_by_user_id TEXT,
    -- How many times the job was claimed; the fence of every worker write.
    attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    -- Not claimable before this instant: the retry backoff.
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
    -- A running job always has an owner and a lease; anything else is a bug worth a failed write.
    CHECK (status <> 'running' OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))
) STRICT;

-- The claim: queued jobs in claim order (priority, then oldest). Partial, so it holds only
-- the jobs waiting, however long the history grows.
CREATE INDEX jobs_claim_order ON jobs (priority DESC, created_at, id) WHERE status = 'queued';

-- Keyset listing newest first, filtered by state or by type (the unfiltered listing walks
-- the primary key).
CREATE INDEX jobs_by_status ON jobs (status, id);
CREATE INDEX jobs_by_type ON jobs (job_type, id);

-- The lease rescuer: running jobs by lease expiry.
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'running';

-- Each job's timeline. The id is the cursor of event streams (SSE resumes after the last
-- id it sent), so AUTOINCREMENT: ids only grow and are never reused, even after deletes.
CREATE TABLE job_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    level TEXT NOT NULL CHECK (level IN ('info', 'warn', 'error')),
    message TEXT NOT NULL,
    payload TEXT NOT NULL CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    created_at INTEGER NOT NULL
) STRICT;

-- A job's events in order, from a cursor.
CREATE INDEX job_events_by_job ON job_events (job_id, id);

-- Metadata of the files workers store for a job; the bytes live on disk under
-- {artifacts_dir}/{job_id}/{name}. One row per name: uploading a name again replaces it,
-- and the unique index also serves listing a job's artifacts.
CREATE TABLE artifacts (
    id TEXT PRIMARY KEY NOT NULL,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    size INTEGER NOT NULL CHECK (size >= 0),
    content_type TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (job_id, name)
) STRICT;
