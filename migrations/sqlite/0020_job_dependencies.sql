-- Jobs that wait for others (SQLite; see the PostgreSQL migration of the same number).
CREATE TABLE job_dependencies (
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    depends_on TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    state TEXT NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'met', 'broken')),
    PRIMARY KEY (job_id, depends_on)
) STRICT;

CREATE INDEX job_dependencies_needed_by ON job_dependencies (depends_on);
CREATE INDEX job_dependencies_waiting ON job_dependencies (depends_on) WHERE state = 'waiting';
