-- The pull requests the server watches for their jobs, and the webhook event that asks a
-- person to look at one (SQLite; see the PostgreSQL migration of the same number). The
-- outbox is made again for its CHECK, as in 0016.
CREATE TABLE pr_watches (
    job_id TEXT PRIMARY KEY NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    state TEXT NOT NULL CHECK (state IN ('watching', 'needs_attention', 'closed')),
    pull TEXT,
    quiet INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until INTEGER,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX pr_watches_due ON pr_watches (next_at) WHERE state = 'watching';
CREATE INDEX pr_watches_pull ON pr_watches (pull) WHERE pull IS NOT NULL;

CREATE TRIGGER pr_watches_on_completed AFTER INSERT ON job_events
WHEN NEW.kind = 'job.completed' AND json_type(NEW.payload, '$.feedback') IS NOT NULL
BEGIN
    INSERT INTO pr_watches (job_id, state, next_at, updated_at)
    VALUES (NEW.job_id, 'watching', NEW.created_at, NEW.created_at)
    ON CONFLICT (job_id) DO UPDATE SET state = 'watching', quiet = 0,
        next_at = excluded.next_at, lease_owner = NULL, lease_until = NULL,
        updated_at = excluded.updated_at;
END;

DROP TRIGGER webhook_outbox_on_event;

CREATE TABLE webhook_outbox_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    event_id INTEGER NOT NULL,
    event TEXT NOT NULL
        CHECK (event IN ('job.ended', 'job.awaiting_approval', 'job.budget_exceeded',
                         'job.needs_attention')),
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    settled TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(settled)),
    created_at INTEGER NOT NULL
) STRICT;

INSERT INTO webhook_outbox_new (id, job_id, event_id, event, status, attempt, next_at,
    lease_owner, lease_until, settled, created_at)
SELECT id, job_id, event_id, event, status, attempt, next_at, lease_owner, lease_until,
    settled, created_at
FROM webhook_outbox;

DROP TABLE webhook_outbox;
ALTER TABLE webhook_outbox_new RENAME TO webhook_outbox;
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at);

CREATE TRIGGER webhook_outbox_on_event AFTER INSERT ON job_events
WHEN NEW.kind IN ('job.completed', 'job.failed', 'job.dead_lettered', 'job.cancelled',
                  'job.rejected', 'job.approval_requested', 'job.budget_exceeded',
                  'job.needs_attention')
    AND EXISTS (SELECT 1 FROM webhook_listeners WHERE seen_at > NEW.created_at - 600000)
BEGIN
    INSERT INTO webhook_outbox (job_id, event_id, event, status, next_at, created_at)
    VALUES (
        NEW.job_id,
        NEW.id,
        CASE NEW.kind
            WHEN 'job.approval_requested' THEN 'job.awaiting_approval'
            WHEN 'job.budget_exceeded' THEN 'job.budget_exceeded'
            WHEN 'job.needs_attention' THEN 'job.needs_attention'
            ELSE 'job.ended'
        END,
        CASE NEW.kind
            WHEN 'job.completed' THEN 'succeeded'
            WHEN 'job.dead_lettered' THEN 'dead_letter'
            WHEN 'job.cancelled' THEN 'cancelled'
            WHEN 'job.approval_requested' THEN 'awaiting_approval'
            WHEN 'job.budget_exceeded' THEN 'running'
            WHEN 'job.needs_attention' THEN 'succeeded'
            ELSE 'failed'
        END,
        NEW.created_at,
        NEW.created_at
    );
END;
