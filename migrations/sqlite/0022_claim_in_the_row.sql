-- A job's `job.claimed` is kept in its row (issue 39); see the PostgreSQL migration of the
-- same number. Its id is drawn from job_events' AUTOINCREMENT counter (`sqlite_sequence`)
-- under the writer's lock; times are milliseconds, as everywhere here.
ALTER TABLE jobs ADD COLUMN claimed_event_id INTEGER;
ALTER TABLE jobs ADD COLUMN claimed_at INTEGER;
ALTER TABLE jobs ADD COLUMN claim_lease_until INTEGER;

-- The claim draws its ids from job_events' counter, which SQLite makes only with the first
-- event row; every job is created with one, but a database whose counter is missing gets
-- it here rather than failing its first claim.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'job_events', COALESCE((SELECT MAX(id) FROM job_events), 0)
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'job_events');
