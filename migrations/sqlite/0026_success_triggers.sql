-- A success updates a job's GitHub reply only when it came from GitHub (issue 39); see the
-- PostgreSQL migration of the same number. SQLite's other two success triggers (0021)
-- already fire only for the jobs they are for.
DROP TRIGGER jobs_on_completed_reply;
CREATE TRIGGER jobs_on_completed_reply AFTER UPDATE OF completed_event_id ON jobs
WHEN OLD.completed_event_id IS NULL AND NEW.completed_event_id IS NOT NULL
    AND json_extract(NEW.payload, '$.source.kind') = 'github'
BEGIN
    UPDATE issue_replies SET state = 'due', version = version + 1, failures = 0,
        next_at = NEW.finished_at, updated_at = NEW.finished_at
    WHERE job_id = NEW.id AND state <> 'done';
END;
