-- Issue 39: a claim is never HOT (it changes `status`, which the partial indexes name), so
-- each claim adds an entry to every index whose predicate its new version meets: the
-- primary key and the index of running jobs. That index was keyed by (id, repository),
-- its entry as long as the repository's name, and nothing reads the name from it: the
-- repository limit counts the running jobs of one repository by reading their rows (the
-- live table changes too often for its pages to be all-visible, which an index-only scan
-- needs). Keyed by the id alone, every claim's entry is the primary key's size. SQLite
-- keeps (id, repository), where the count reads it without the table.
DROP INDEX job_queue_running;
CREATE INDEX job_queue_running ON job_queue (id) WHERE status = 'running';
