-- Issue 39: a batch of successes ends jobs that were created together and sit on the same
-- pages. At a fillfactor of 70 (0013, 0025) their new versions outgrew the page's free room,
-- so about half of a batch's updates left the page: not HOT, a new entry in each index of
-- `jobs`, and the whole new row in the WAL (about 1,200 WAL bytes a job batched, against
-- about 740 at 50). Half of each page is now kept for the next versions of its rows; the
-- heap's size per job grows, measured by `bench scale` in the README.
-- Pages already written keep their rows as they are: the setting applies to the pages
-- that inserts fill from now on, so no rewrite and no lock beyond the moment of the change.
ALTER TABLE jobs SET (fillfactor = 50);
