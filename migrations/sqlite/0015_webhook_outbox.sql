-- The webhook outbox (SQLite): one row per notification of a job's end or of its wait for
-- approval, written by the trigger below in the transaction that stored the event, so a
-- notification exists exactly when its event does. A replica claims a row with a lease,
-- posts it to every webhook once, and either settles it or leaves it for the next try:
-- a replica that stops between tries leaves a row another (or the next start) picks up.
CREATE TABLE webhook_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    -- The event it tells of, and what it is posted as.
    event_id INTEGER NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('job.ended', 'job.awaiting_approval')),
    -- The job's state as that event left it (the job may move on before the post).
    status TEXT NOT NULL,
    -- Tries made so far, each to every webhook not yet settled; the fence of a claim.
    attempt INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    -- The webhooks done with (delivered, refused or given up): a JSON array of their keys.
    settled TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(settled)),
    created_at INTEGER NOT NULL
) STRICT;

-- What is left to post, by when it is due.
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at);

-- The replicas that post webhooks, each seen within the last few minutes: with none, no
-- notification is written, and a queue without webhooks pays one empty lookup per end.
CREATE TABLE webhook_listeners (
    replica TEXT PRIMARY KEY NOT NULL,
    seen_at INTEGER NOT NULL
) STRICT;

CREATE TRIGGER webhook_outbox_on_event AFTER INSERT ON job_events
WHEN NEW.kind IN ('job.completed', 'job.failed', 'job.dead_lettered', 'job.cancelled',
                  'job.rejected', 'job.approval_requested')
    AND EXISTS (SELECT 1 FROM webhook_listeners WHERE seen_at > NEW.created_at - 600000)
BEGIN
    INSERT INTO webhook_outbox (job_id, event_id, event, status, next_at, created_at)
    VALUES (
        NEW.job_id,
        NEW.id,
        CASE NEW.kind WHEN 'job.approval_requested' THEN 'job.awaiting_approval' ELSE 'job.ended' END,
        CASE NEW.kind
            WHEN 'job.completed' THEN 'succeeded'
            WHEN 'job.dead_lettered' THEN 'dead_letter'
            WHEN 'job.cancelled' THEN 'cancelled'
            WHEN 'job.approval_requested' THEN 'awaiting_approval'
            ELSE 'failed'
        END,
        NEW.created_at,
        NEW.created_at
    );
END;
