-- Workers the server has seen (SQLite). Every claim and heartbeat says a worker is alive
-- and what it can run; the dashboard lists the workers and explains a queued job that no
-- live worker can run. The queue writes a worker's row at most every few seconds, so a
-- busy worker's claims do not each pay for an update. Timestamps are Unix milliseconds.
CREATE TABLE workers (
    -- The worker's id: its token's name.
    id TEXT PRIMARY KEY NOT NULL,
    -- JSON array of the capabilities it last claimed with (after its token narrowed them).
    capabilities TEXT NOT NULL CHECK (json_type(capabilities) = 'array'),
    -- What the worker says it runs, e.g. `stepwise-worker 0.1.0`; NULL if it never said.
    version TEXT,
    first_seen_at INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
) STRICT;
