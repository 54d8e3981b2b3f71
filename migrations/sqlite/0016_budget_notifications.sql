-- A job's budget reached (`job.budget_exceeded`) is posted to the webhooks too (SQLite;
-- see the PostgreSQL migration of the same number). SQLite cannot change a CHECK in place,
-- so the outbox is made again the way SQLite documents it (rows copied, ids kept), and the
-- trigger with it.
DROP TRIGGER webhook_outbox_on_event;

CREATE TABLE webhook_outbox_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    event_id INTEGER NOT NULL,
    event TEXT NOT NULL
        CHECK (event IN ('job.ended', 'job.awaiting_approval', 'job.budget_exceeded')),
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
                  'job.rejected', 'job.approval_requested', 'job.budget_exceeded')
    AND EXISTS (SELECT 1 FROM webhook_listeners WHERE seen_at > NEW.created_at - 600000)
BEGIN
    INSERT INTO webhook_outbox (job_id, event_id, event, status, next_at, created_at)
    VALUES (
        NEW.job_id,
        NEW.id,
        CASE NEW.kind
            WHEN 'job.approval_requested' THEN 'job.awaiting_approval'
            WHEN 'job.budget_exceeded' THEN 'job.budget_exceeded'
            ELSE 'job.ended'
        END,
        CASE NEW.kind
            WHEN 'job.completed' THEN 'succeeded'
            WHEN 'job.dead_lettered' THEN 'dead_letter'
            WHEN 'job.cancelled' THEN 'cancelled'
            WHEN 'job.approval_requested' THEN 'awaiting_approval'
            WHEN 'job.budget_exceeded' THEN 'running'
            ELSE 'failed'
        END,
        NEW.created_at,
        NEW.created_at
    );
END;
