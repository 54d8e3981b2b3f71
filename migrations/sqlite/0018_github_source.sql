-- Jobs that come from GitHub, and the comment the server keeps on the issue that asked
-- (SQLite; see the PostgreSQL migration of the same number).
CREATE UNIQUE INDEX jobs_source_event ON jobs (json_extract(payload, '$.source.event'))
    WHERE json_extract(payload, '$.source.event') IS NOT NULL;

CREATE TABLE issue_replies (
    job_id TEXT PRIMARY KEY NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    issue TEXT NOT NULL,
    comment_id INTEGER,
    state TEXT NOT NULL CHECK (state IN ('due', 'posted', 'done')),
    pull TEXT,
    version INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until INTEGER,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX issue_replies_due ON issue_replies (next_at) WHERE state = 'due';
CREATE INDEX issue_replies_pull ON issue_replies (pull) WHERE pull IS NOT NULL;

CREATE TRIGGER issue_replies_on_created AFTER INSERT ON job_events
WHEN NEW.kind = 'job.created' AND json_extract(NEW.payload, '$.source.kind') = 'github'
BEGIN
    INSERT INTO issue_replies (job_id, issue, state, next_at, updated_at)
    VALUES (NEW.job_id, json_extract(NEW.payload, '$.source.issue'), 'due', NEW.created_at,
            NEW.created_at)
    ON CONFLICT (job_id) DO NOTHING;
END;

CREATE TRIGGER issue_replies_on_ended AFTER INSERT ON job_events
WHEN NEW.kind IN ('job.completed', 'job.failed', 'job.dead_lettered', 'job.cancelled',
                  'job.rejected')
BEGIN
    UPDATE issue_replies SET state = 'due', version = version + 1, failures = 0,
        next_at = NEW.created_at, updated_at = NEW.created_at
    WHERE job_id = NEW.job_id AND state <> 'done';
END;
