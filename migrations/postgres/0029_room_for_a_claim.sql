-- Issue 39: a batch of claims leases live rows that were made together and share pages.
-- A claim changes `status`, which the partial indexes of `job_queue` name, so its update is
-- never HOT; but a new version written on its old row's page is logged as the changed
-- middle of the row only, and one written elsewhere whole. At 0025's fillfactor of 70 a
-- page holds about 40 waiting rows and room for the leased versions of about 15 of them,
-- so when one or two batches lease a whole page at once many of those versions moved. At
-- 40 a page holds about 22, and room for all of their leased versions. The live table holds
-- only the jobs that wait or run: the room costs space per waiting job, not per job kept.
-- Pages already written keep their rows as they are.
ALTER TABLE job_queue SET (fillfactor = 40);
