-- A job's `job.claimed` is kept in its row (issue 39); see the PostgreSQL migration of the
-- same number. Its id is drawn from job_events' AUTOINCREMENT counter (`sqlite_sequence`)
-- under the writer's lock; times are milliseconds, as everywhere here.
ALTER TABLE jobs ADD COLUMN claimed_event_id INTEGER;
ALTER TABLE jobs ADD COLUMN claimed_at INTEGER;
ALTER TABLE jobs ADD COLUMN claim_lease_until INTEGER;
