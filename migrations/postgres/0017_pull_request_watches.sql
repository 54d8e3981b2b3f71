-- The pull requests the server watches for their jobs (`task.publish.feedback`), and the
-- webhook event that asks a person to look at one (`job.needs_attention`).
--
-- A watch is written by the trigger below in the statement that stored the job's
-- completion, when that completion names `feedback` (the lock-free swap included), so a
-- watch exists exactly when a completion that wants one does; a later completion (the end
-- of a round) watches afresh. A replica leases due rows (SKIP LOCKED), reads the pull
-- request from GitHub, and reschedules or ends the row under the lease's fence.
CREATE TABLE pr_watches (
    job_id uuid PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    state text NOT NULL CHECK (state IN ('watching', 'needs_attention', 'closed')),
    -- The pull request's address, once a replica read it from the job's publish result:
    -- what a webhook from GitHub is matched by.
    pull text,
    -- Looks in a row that found nothing to do: the wait before the next grows with them.
    quiet bigint NOT NULL DEFAULT 0,
    next_at timestamptz NOT NULL,
    -- Leases taken so far; the fence of a lease.
    attempt bigint NOT NULL DEFAULT 0,
    lease_owner text,
    lease_until timestamptz,
    updated_at timestamptz NOT NULL
);

CREATE INDEX pr_watches_due ON pr_watches (next_at) WHERE state = 'watching';
CREATE INDEX pr_watches_pull ON pr_watches (pull) WHERE pull IS NOT NULL;

CREATE FUNCTION pr_watches_on_completed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pr_watches (job_id, state, next_at, updated_at)
    VALUES (NEW.job_id, 'watching', NEW.created_at, NEW.created_at)
    ON CONFLICT (job_id) DO UPDATE SET state = 'watching', quiet = 0,
        next_at = excluded.next_at, lease_owner = NULL, lease_until = NULL,
        updated_at = excluded.updated_at;
    RETURN NULL;
END;
$$;

CREATE TRIGGER pr_watches_on_completed AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind = 'job.completed' AND NEW.payload ? 'feedback')
EXECUTE FUNCTION pr_watches_on_completed();

ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check
    CHECK (event IN ('job.ended', 'job.awaiting_approval', 'job.budget_exceeded',
                     'job.needs_attention'));

CREATE OR REPLACE FUNCTION webhook_outbox_on_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhook_listeners
                   WHERE seen_at > NEW.created_at - interval '10 minutes') THEN
        RETURN NULL;
    END IF;
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
    RETURN NULL;
END;
$$;

DROP TRIGGER webhook_outbox_on_event ON job_events;
CREATE TRIGGER webhook_outbox_on_event AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind IN ('job.completed', 'job.failed', 'job.dead_lettered', 'job.cancelled',
                   'job.rejected', 'job.approval_requested', 'job.budget_exceeded',
                   'job.needs_attention'))
EXECUTE FUNCTION webhook_outbox_on_event();
