-- A job's claim and success no longer write an entry in an index of its state (issue 39);
-- see the PostgreSQL migration of the same number. SQLite uses a partial index only for a
-- query that repeats its predicate, which the list's and the counts' statements do; with
-- no statistics it would rather walk the primary key in order than sort the running jobs,
-- so their index is in the list's order too.
DROP INDEX jobs_by_status;
CREATE INDEX jobs_listed_apart ON jobs (status, id)
    WHERE status NOT IN ('running', 'succeeded');
DROP INDEX jobs_running_by_repository;
CREATE INDEX jobs_running ON jobs (id, repository) WHERE status = 'running';
