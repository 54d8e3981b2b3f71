-- Issue 39: a success's trigger (0021) did three things for every job, each a statement of
-- its own in PL/pgSQL, about a tenth of the server's time per job: looked for a webhook
-- listener, looked at the task for pull request feedback, and updated the job's GitHub
-- reply if it had one. Only the first needs a table to decide; the other two are now
-- triggers of their own that fire only for the jobs they are for, so a plain job's
-- success runs one statement in it. What each does is unchanged.
CREATE OR REPLACE FUNCTION jobs_on_completed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM webhook_listeners
               WHERE seen_at > NEW.finished_at - interval '10 minutes') THEN
        INSERT INTO webhook_outbox (job_id, event_id, event, status, next_at, created_at)
        VALUES (NEW.id, NEW.completed_event_id, 'job.ended', 'succeeded', NEW.finished_at,
                NEW.finished_at);
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION jobs_on_completed_watch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pr_watches (job_id, state, next_at, updated_at)
    VALUES (NEW.id, 'watching', NEW.finished_at, NEW.finished_at)
    ON CONFLICT (job_id) DO UPDATE SET state = 'watching', quiet = 0,
        next_at = excluded.next_at, lease_owner = NULL, lease_until = NULL,
        updated_at = excluded.updated_at;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_on_completed_watch AFTER UPDATE OF completed_event_id ON jobs
FOR EACH ROW
WHEN (OLD.completed_event_id IS NULL AND NEW.completed_event_id IS NOT NULL
      AND NEW.payload #> '{task,publish,feedback}' IS NOT NULL)
EXECUTE FUNCTION jobs_on_completed_watch();

-- A job has a reply when it came from GitHub (0018 writes it with its `job.created`).
CREATE FUNCTION jobs_on_completed_reply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE issue_replies SET state = 'due', version = version + 1, failures = 0,
        next_at = NEW.finished_at, updated_at = NEW.finished_at
    WHERE job_id = NEW.id AND state <> 'done';
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_on_completed_reply AFTER UPDATE OF completed_event_id ON jobs
FOR EACH ROW
WHEN (OLD.completed_event_id IS NULL AND NEW.completed_event_id IS NOT NULL
      AND NEW.payload #>> '{source,kind}' = 'github')
EXECUTE FUNCTION jobs_on_completed_reply();
