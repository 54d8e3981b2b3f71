-- Leaner writes per job transition (see the PostgreSQL migration of the same number).

-- Nearly every job has the same type, so this index narrowed nothing while every state
-- change paid for an entry in it. Listing by type now walks the primary key backwards,
-- which finds a page of a common type at once.
DROP INDEX jobs_by_type;
