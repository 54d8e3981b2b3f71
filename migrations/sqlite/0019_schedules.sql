-- Recurring tasks (SQLite; see the PostgreSQL migration of the same number).
CREATE TABLE schedules (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL UNIQUE,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    task TEXT NOT NULL CHECK (json_valid(task)),
    overlap TEXT NOT NULL CHECK (overlap IN ('skip', 'queue')),
    catch_up INTEGER NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    last_slot INTEGER,
    last_job_id TEXT,
    skipped INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until INTEGER,
    created_by_user_id TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX schedules_due ON schedules (next_at) WHERE paused = 0;

CREATE UNIQUE INDEX jobs_schedule_slot
    ON jobs (json_extract(payload, '$.source.schedule'), json_extract(payload, '$.source.slot'))
    WHERE json_extract(payload, '$.source.kind') = 'schedule';
