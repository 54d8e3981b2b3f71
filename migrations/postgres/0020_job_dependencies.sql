-- Jobs that wait for others (`dependsOn`). A waiting job is stored queued with its start
-- at the end of time (`next_attempt_at` = 9999-12-31), which the claim's index already
-- passes over, so the claim stays the one indexed read it was. An edge is `waiting`
-- until the job it names ends: `met` when that job succeeded, `broken` otherwise. Every
-- replica's resolver reads the waiting edges whose job ended, releases a job whose edges
-- are all met (its start becomes now) and cancels one with a broken edge, naming it.
CREATE TABLE job_dependencies (
    job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    depends_on uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    state text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'met', 'broken')),
    PRIMARY KEY (job_id, depends_on)
);

-- The other way: which jobs wait for a job (its page shows them).
CREATE INDEX job_dependencies_needed_by ON job_dependencies (depends_on);
CREATE INDEX job_dependencies_waiting ON job_dependencies (depends_on) WHERE state = 'waiting';
