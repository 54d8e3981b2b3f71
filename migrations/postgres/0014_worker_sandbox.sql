-- How each worker boxes its agents' steps (PostgreSQL): `bwrap`, `bwrap, no network` or
-- `off`, as its claims say, for the workers page; NULL for a worker that never said (an
-- older stepwise worker, or the seed system's). Adding a nullable column rewrites nothing.
ALTER TABLE workers ADD COLUMN sandbox text;
