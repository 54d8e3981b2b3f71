-- The webhook outbox (PostgreSQL): one row per notification of a job's end or of its wait
-- for approval, written by the trigger below in the statement that stored the event (the
-- lock-free swap included), so a notification exists exactly when its event does (while a replica that posts
-- webhooks is listening, below). A
-- replica claims rows with a lease (SKIP LOCKED), posts each to every webhook once, and
-- either settles it or leaves it for the next try: a replica that stops between tries
-- leaves a row another (or the next start) picks up once the lease ends.
CREATE TABLE webhook_outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    -- The event it tells of, and what it is posted as.
    event_id bigint NOT NULL,
    event text NOT NULL CHECK (event IN ('job.ended', 'job.awaiting_approval')),
    -- The job's state as that event left it (the job may move on before the post).
    status text NOT NULL,
    -- Tries made so far, each to every webhook not yet settled; the fence of a claim.
    attempt bigint NOT NULL DEFAULT 0,
    next_at timestamptz NOT NULL,
    lease_owner text,
    lease_until timestamptz,
    -- The webhooks done with (delivered, refused or given up), by key.
    settled jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(settled) = 'array'),
    created_at timestamptz NOT NULL
);

-- What is left to post, by when it is due.
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at);

-- The replicas that post webhooks, each seen within the last few minutes: with none, no
-- notification is written, and a queue without webhooks pays one empty lookup per end.
CREATE TABLE webhook_listeners (
    replica text PRIMARY KEY,
    seen_at timestamptz NOT NULL
);

CREATE FUNCTION webhook_outbox_on_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhook_listeners
                   WHERE seen_at > NEW.created_at - interval '10 minutes') THEN
        RETURN NULL;
    END IF;
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
    RETURN NULL;
END;
$$;

-- Only the few kinds that notify call the function: every other event pays one comparison.
CREATE TRIGGER webhook_outbox_on_event AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind IN ('job.completed', 'job.failed', 'job.dead_lettered', 'job.cancelled',
                   'job.rejected', 'job.approval_requested'))
EXECUTE FUNCTION webhook_outbox_on_event();
