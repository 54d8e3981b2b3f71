-- The limit of running jobs per repository: a claim counts, for each queued job it looks
-- at, the jobs already running on that job's repository. Running jobs are few, so this
-- partial index stays small, and the count reads it rather than every job of the repository.
CREATE INDEX jobs_running_by_repository ON jobs (repository) WHERE status = 'running';
