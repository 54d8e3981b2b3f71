-- A job's `job.completed` is kept in its row, not as an event row of its own (issue 39);
-- see the PostgreSQL migration of the same number. Its id is drawn from job_events'
-- AUTOINCREMENT counter (`sqlite_sequence`) under the writer's lock.
ALTER TABLE jobs ADD COLUMN completed_event_id INTEGER;

CREATE TRIGGER jobs_on_completed_outbox AFTER UPDATE OF completed_event_id ON jobs
WHEN OLD.completed_event_id IS NULL AND NEW.completed_event_id IS NOT NULL
    AND EXISTS (SELECT 1 FROM webhook_listeners WHERE seen_at > NEW.finished_at - 600000)
BEGIN
    INSERT INTO webhook_outbox (job_id, event_id, event, status, next_at, created_at)
    VALUES (NEW.id, NEW.completed_event_id, 'job.ended', 'succeeded', NEW.finished_at,
            NEW.finished_at);
END;

CREATE TRIGGER jobs_on_completed_watch AFTER UPDATE OF completed_event_id ON jobs
WHEN OLD.completed_event_id IS NULL AND NEW.completed_event_id IS NOT NULL
    AND json_type(NEW.payload, '$.task.publish.feedback') IS NOT NULL
BEGIN
    INSERT INTO pr_watches (job_id, state, next_at, updated_at)
    VALUES (NEW.id, 'watching', NEW.finished_at, NEW.finished_at)
    ON CONFLICT (job_id) DO UPDATE SET state = 'watching', quiet = 0,
        next_at = excluded.next_at, lease_owner = NULL, lease_until = NULL,
        updated_at = excluded.updated_at;
END;

CREATE TRIGGER jobs_on_completed_reply AFTER UPDATE OF completed_event_id ON jobs
WHEN OLD.completed_event_id IS NULL AND NEW.completed_event_id IS NOT NULL
BEGIN
    UPDATE issue_replies SET state = 'due', version = version + 1, failures = 0,
        next_at = NEW.finished_at, updated_at = NEW.finished_at
    WHERE job_id = NEW.id AND state <> 'done';
END;

DROP TRIGGER pr_watches_on_completed;

DROP TRIGGER webhook_outbox_on_event;
CREATE TRIGGER webhook_outbox_on_event AFTER INSERT ON job_events
WHEN NEW.kind IN ('job.failed', 'job.dead_lettered', 'job.cancelled',
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

DROP TRIGGER issue_replies_on_ended;
CREATE TRIGGER issue_replies_on_ended AFTER INSERT ON job_events
WHEN NEW.kind IN ('job.failed', 'job.dead_lettered', 'job.cancelled', 'job.rejected')
BEGIN
    UPDATE issue_replies SET state = 'due', version = version + 1, failures = 0,
        next_at = NEW.created_at, updated_at = NEW.created_at
    WHERE job_id = NEW.job_id AND state <> 'done';
END;
