-- A job's `job.completed` is kept in its row, not as an event row of its own (issue 39):
-- a success no longer writes an event row and its index entry. `completed_event_id` is the
-- event's id, drawn from job_events' own sequence under the row's lock, so a job's events
-- still become visible in id order; readers of the timeline build the event from the row
-- with the same builder the completion used (`machine::completed_event`), so what they
-- read is what they read before. Before anything else changes a succeeded job (a next
-- round, say), the queue writes the event out as a row under its id and clears this.
-- NULL: the job has not succeeded, or its success is a row (as every one before this).
ALTER TABLE jobs ADD COLUMN completed_event_id bigint;

-- What the database did when a `job.completed` row was inserted, it now does when a row's
-- `completed_event_id` is first set; a `job.completed` row is only ever written out since
-- (the same event, already told), so the triggers on job_events no longer hear it.
CREATE FUNCTION jobs_on_completed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM webhook_listeners
               WHERE seen_at > NEW.finished_at - interval '10 minutes') THEN
        INSERT INTO webhook_outbox (job_id, event_id, event, status, next_at, created_at)
        VALUES (NEW.id, NEW.completed_event_id, 'job.ended', 'succeeded', NEW.finished_at,
                NEW.finished_at);
    END IF;
    IF NEW.payload #> '{task,publish,feedback}' IS NOT NULL THEN
        INSERT INTO pr_watches (job_id, state, next_at, updated_at)
        VALUES (NEW.id, 'watching', NEW.finished_at, NEW.finished_at)
        ON CONFLICT (job_id) DO UPDATE SET state = 'watching', quiet = 0,
            next_at = excluded.next_at, lease_owner = NULL, lease_until = NULL,
            updated_at = excluded.updated_at;
    END IF;
    UPDATE issue_replies SET state = 'due', version = version + 1, failures = 0,
        next_at = NEW.finished_at, updated_at = NEW.finished_at
    WHERE job_id = NEW.id AND state <> 'done';
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_on_completed AFTER UPDATE OF completed_event_id ON jobs FOR EACH ROW
WHEN (OLD.completed_event_id IS NULL AND NEW.completed_event_id IS NOT NULL)
EXECUTE FUNCTION jobs_on_completed();

DROP TRIGGER pr_watches_on_completed ON job_events;

DROP TRIGGER webhook_outbox_on_event ON job_events;
CREATE TRIGGER webhook_outbox_on_event AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind IN ('job.failed', 'job.dead_lettered', 'job.cancelled',
                   'job.rejected', 'job.approval_requested', 'job.budget_exceeded',
                   'job.needs_attention'))
EXECUTE FUNCTION webhook_outbox_on_event();

DROP TRIGGER issue_replies_on_ended ON job_events;
CREATE TRIGGER issue_replies_on_ended AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind IN ('job.failed', 'job.dead_lettered', 'job.cancelled', 'job.rejected'))
EXECUTE FUNCTION issue_replies_on_ended();
