-- Lighter transitions on PostgreSQL. `stepwise bench queue --peer graphile-worker`, read
-- with pg_waldump, found each claim + complete writing about 22 WAL records where
-- graphile-worker writes 7: among them a lock on the job's row for every event inserted,
-- and an entry in an index that only the lease rescuer reads.

-- The foreign key of job_events. Each insert checked it by locking the job's row (FOR KEY
-- SHARE): one more WAL record and a dirtied page per event, log lines included. Every event
-- is written with its job's row locked, or in the statement that creates the job, so the
-- reference holds by construction; retention, which deletes job rows, deletes their events
-- in the same transaction, as the cascade did (queue/src/store/retention.rs).
ALTER TABLE job_events DROP CONSTRAINT IF EXISTS job_events_job_id_fkey;

-- The rescuer's index of running jobs by lease end. Running jobs are few (one per busy
-- worker slot), and the rescuer finds them through jobs_running_by_repository, whose
-- condition is the same. Without this index a heartbeat changes no indexed column, so
-- PostgreSQL can write it as a HOT update, with no index entry at all.
DROP INDEX IF EXISTS jobs_lease_expiry;
