-- Retention finds its work without an index that names `finished_at` (issue 39); see the
-- PostgreSQL migration of the same number. Ids are TEXT, whose order is UUIDv7's.

CREATE TABLE retention_cursors (
    chore TEXT PRIMARY KEY NOT NULL,
    after_id TEXT NOT NULL
) STRICT;

CREATE TABLE retention_pending (
    chore TEXT NOT NULL,
    job_id TEXT NOT NULL,
    finished_at INTEGER,
    recheck_at INTEGER,
    PRIMARY KEY (chore, job_id)
) STRICT;
CREATE INDEX retention_pending_finished ON retention_pending (chore, finished_at, job_id)
    WHERE finished_at IS NOT NULL;
CREATE INDEX retention_pending_recheck ON retention_pending (chore, recheck_at, job_id)
    WHERE recheck_at IS NOT NULL;

DROP INDEX jobs_history_kept;
