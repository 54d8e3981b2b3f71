-- Leaner writes per job transition. `stepwise bench queue` found PostgreSQL bound by WAL
-- flushes, with about 29 WAL records per job against graphile-worker's 15.

-- Nearly every job has the same type, so this index narrowed nothing while every state
-- change (none of which can be a HOT update: status is indexed) paid for an entry in it.
-- Listing by type now walks the primary key backwards, which finds a page of a common
-- type at once.
DROP INDEX jobs_by_type;
