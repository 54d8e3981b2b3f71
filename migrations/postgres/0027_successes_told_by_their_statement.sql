-- Issue 39: the outbox's check of a success (0021, 0026) was a row trigger, a PL/pgSQL
-- call for every success that cost a fifth of a lone completion's server time. The
-- statements that draw a success's id now write its notice themselves, reading the
-- listeners once per statement (`told_of_successes!` in the queue's PostgreSQL driver);
-- what is written, and when, is unchanged. The pull request watch and the GitHub reply
-- keep their triggers: each fires only for the jobs it is for.
DROP TRIGGER jobs_on_completed ON jobs;
DROP FUNCTION jobs_on_completed();
