-- Issue 39, step 2, first part: a job's claim and its success no longer write an entry in
-- an index of its state. `jobs_by_status` (status, id) took one from every update that is
-- not HOT, the claim's and the success's too. `jobs_listed_apart` holds only the states a
-- list filters to be few: queued, paused, awaiting approval and the ends other than
-- success, so a claim (queued -> running) and a success (running -> succeeded) leave it
-- untouched. Running jobs are listed through `jobs_running`, which takes the place of
-- `jobs_running_by_repository` (0009) with the same entries, now in the list's order (the
-- queue's connections discourage sorts, so an index out of order would be passed over for
-- a walk of the whole primary key); the claim still counts a repository's running jobs in
-- it. Succeeded jobs, most of the table, are listed by walking the primary key newest
-- first; the counts of each state subtract (`store/jobs.rs`, which writes the predicate
-- once for every statement that reads through it).
DROP INDEX jobs_by_status;
CREATE INDEX jobs_listed_apart ON jobs (status, id)
    WHERE status NOT IN ('running', 'succeeded');
DROP INDEX jobs_running_by_repository;
CREATE INDEX jobs_running ON jobs (id, repository) WHERE status = 'running';
