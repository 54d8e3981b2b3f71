-- Jobs that come from GitHub (`payload.source`): one job per webhook delivery, and the
-- comment the server keeps on the issue that asked for it.
--
-- What asked (`source.event`: the comment's id, or the issue, label and time of a label,
-- read from the signed body) is unique among jobs, so a delivery GitHub sends again, the
-- same body replayed under another delivery id, or two replicas taking it at once, is the
-- job the first made: the insert itself refuses the second.
CREATE UNIQUE INDEX jobs_source_event ON jobs ((payload #>> '{source,event}'))
    WHERE payload ? 'source';

-- The server's comment on the issue (or pull request) a job answers. A row is written by
-- the trigger below in the statement that stored the job's `job.created` naming a source;
-- the end of the job makes it due again (`version` moves on, so a reply being written as
-- the job ends is written once more). Replicas lease due rows (SKIP LOCKED), fenced by the
-- attempt, as the pull request watches are.
CREATE TABLE issue_replies (
    job_id uuid PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    -- The page of the issue or pull request the comment is on.
    issue text NOT NULL,
    -- GitHub's id of the comment, once written: later replies edit it.
    comment_id bigint,
    state text NOT NULL CHECK (state IN ('due', 'posted', 'done')),
    -- The pull request the job opened, once a reply read it: a mention on it is the job's.
    pull text,
    version bigint NOT NULL DEFAULT 0,
    -- Tries in a row that GitHub refused or could not be reached.
    failures bigint NOT NULL DEFAULT 0,
    next_at timestamptz NOT NULL,
    attempt bigint NOT NULL DEFAULT 0,
    lease_owner text,
    lease_until timestamptz,
    updated_at timestamptz NOT NULL
);

CREATE INDEX issue_replies_due ON issue_replies (next_at) WHERE state = 'due';
CREATE INDEX issue_replies_pull ON issue_replies (pull) WHERE pull IS NOT NULL;

CREATE FUNCTION issue_replies_on_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO issue_replies (job_id, issue, state, next_at, updated_at)
    VALUES (NEW.job_id, NEW.payload #>> '{source,issue}', 'due', NEW.created_at,
            NEW.created_at)
    ON CONFLICT (job_id) DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE TRIGGER issue_replies_on_created AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind = 'job.created' AND NEW.payload ? 'source'
      AND NEW.payload #>> '{source,kind}' = 'github')
EXECUTE FUNCTION issue_replies_on_created();

CREATE FUNCTION issue_replies_on_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE issue_replies SET state = 'due', version = version + 1, failures = 0,
        next_at = NEW.created_at, updated_at = NEW.created_at
    WHERE job_id = NEW.job_id AND state <> 'done';
    RETURN NULL;
END;
$$;

CREATE TRIGGER issue_replies_on_ended AFTER INSERT ON job_events FOR EACH ROW
WHEN (NEW.kind IN ('job.completed', 'job.failed', 'job.dead_lettered', 'job.cancelled',
                   'job.rejected'))
EXECUTE FUNCTION issue_replies_on_ended();
