-- Retention (queue/src/retention.rs): a finished job's events and artifacts are deleted
-- once it has been finished for long enough, and its log lines (task.step.log events)
-- sooner, once its step-log artifacts hold them. The job row stays unless told otherwise.

-- When retention deleted the job's events and artifacts; NULL while they are kept. It is
-- always later than the finished_at it was due for, so a job retried and finished since
-- (finished_at at or after it) is due once more.
ALTER TABLE jobs ADD COLUMN history_deleted_at timestamptz;
-- When retention deleted the job's log lines that its step-log artifacts hold; the same
-- rule against finished_at.
ALTER TABLE jobs ADD COLUMN logs_compacted_at timestamptz;

-- The finished jobs whose history is still kept, oldest end first: what every retention
-- pass reads. Partial, so the queued and running jobs (finished_at NULL) cost it nothing,
-- and jobs whose history is gone drop out: a pass never walks the years of rows it keeps.
-- With the id, jobs that finished in the same millisecond page in one order.
CREATE INDEX jobs_history_kept ON jobs (finished_at, id)
    WHERE finished_at IS NOT NULL
      AND (history_deleted_at IS NULL OR history_deleted_at <= finished_at);
