-- Workers the server has seen (PostgreSQL). Every claim and heartbeat says a worker is
-- alive and what it can run; the dashboard lists the workers and explains a queued job
-- that no live worker can run. The queue writes a worker's row at most every few seconds,
-- so a busy worker's claims do not each pay for an update.
CREATE TABLE workers (
    -- The worker's id: its token's name.
    id text PRIMARY KEY,
    -- The capabilities it last claimed with (after its token narrowed them).
    capabilities jsonb NOT NULL CHECK (jsonb_typeof(capabilities) = 'array'),
    -- What the worker says it runs, e.g. `stepwise-worker 0.1.0`; NULL if it never said.
    version text,
    first_seen_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL
);
