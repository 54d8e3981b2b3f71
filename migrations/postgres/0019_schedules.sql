-- Recurring tasks: a cron line read in a time zone, and the job request each slot queues.
-- Every replica's scheduler leases due rows (SKIP LOCKED), fenced by the attempt, queues
-- the slot's job and moves `next_at` on. A slot's job is made at most once however many
-- replicas see it: the job carries `payload.source = {"kind": "schedule", "schedule",
-- "slot"}`, unique among jobs (below).
CREATE TABLE schedules (
    id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE,
    cron text NOT NULL,
    timezone text NOT NULL,
    -- The job request, as POST /api/queue/jobs takes it (JSON text: never queried).
    task text NOT NULL,
    overlap text NOT NULL CHECK (overlap IN ('skip', 'queue')),
    catch_up boolean NOT NULL,
    paused boolean NOT NULL DEFAULT false,
    next_at timestamptz NOT NULL,
    last_slot timestamptz,
    last_job_id uuid,
    skipped bigint NOT NULL DEFAULT 0,
    attempt bigint NOT NULL DEFAULT 0,
    lease_owner text,
    lease_until timestamptz,
    created_by_user_id text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused;

CREATE UNIQUE INDEX jobs_schedule_slot
    ON jobs ((payload #>> '{source,schedule}'), (payload #>> '{source,slot}'))
    WHERE payload #>> '{source,kind}' = 'schedule';
