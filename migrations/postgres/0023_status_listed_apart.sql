-- Issue 39, step 2, first part: a job's claim and its success no longer write an entry in
-- an index of its state. `jobs_by_status` (status, id) took one from every update that is
-- not HOT, the claim's and the success's too. This index holds only the states a list
-- filters to be few: queued, paused, awaiting approval and the ends other than success. A
-- claim (queued -> running) and a success (running -> succeeded) leave it untouched. The
-- list finds running jobs through `jobs_running_by_repository` and succeeded ones by
-- walking the primary key, newest first (they are most of the table); the state counts
-- subtract (`store/jobs.rs`). The predicate is written once in the code that reads it.
DROP INDEX jobs_by_status;
CREATE INDEX jobs_listed_apart ON jobs (status, id)
    WHERE status NOT IN ('running', 'succeeded');
