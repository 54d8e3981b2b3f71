-- Issue 39, step 2: retention finds its work without an index that names `finished_at`.
-- `jobs_history_kept` (finished_at, id) took an entry from every job's end, and an update
-- that changes an indexed column is never HOT: with it, a success could not be written on
-- the row's own page without an index entry. Each of retention's chores (log lines,
-- histories, rows) now walks the jobs in id order (UUIDv7: creation order) from a cursor
-- it keeps here, so a pass reads only the jobs that came of age since the last one; a job
-- it passes over before it is due (still live or paused, or finished too recently) is kept
-- in `retention_pending` until it is, and a job queued again after it finished is put
-- there again by the write that queues it (`store/retention.rs`).

-- How far each chore has walked: every job up to `after_id` was done, or is pending.
CREATE TABLE retention_cursors (
    chore text PRIMARY KEY,
    after_id uuid NOT NULL
);

-- The jobs a chore passed over and must look at again: once `finished_at` (copied when the
-- job had finished) is older than the chore's cutoff, or at `recheck_at` for a job that
-- had not finished (its end writes nothing here, so it is looked at now and then).
CREATE TABLE retention_pending (
    chore text NOT NULL,
    job_id uuid NOT NULL,
    finished_at timestamptz,
    recheck_at timestamptz,
    PRIMARY KEY (chore, job_id)
);
CREATE INDEX retention_pending_finished ON retention_pending (chore, finished_at, job_id)
    WHERE finished_at IS NOT NULL;
CREATE INDEX retention_pending_recheck ON retention_pending (chore, recheck_at, job_id)
    WHERE recheck_at IS NOT NULL;

DROP INDEX jobs_history_kept;
