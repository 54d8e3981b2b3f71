-- A job's budget reached (`job.budget_exceeded`) is posted to the webhooks too, as the
-- event of the same name, with the job's state then (running: it pauses next). The
-- outbox takes the new event name, and the trigger the new kind.
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check
    CHECK (event IN ('job.ended', 'job.awaiting_approval', 'job.budget_exceeded'));

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
    RETURN NULL;
END;
$$;

DROP TRIGGER webhook_outbox_on_event ON job_events;
CREATE TRIGGER webhook_outbox_on_event AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind IN ('job.completed', 'job.failed', 'job.dead_lettered', 'job.cancelled',
                   'job.rejected', 'job.approval_requested', 'job.budget_exceeded'))
EXECUTE FUNCTION webhook_outbox_on_event();
