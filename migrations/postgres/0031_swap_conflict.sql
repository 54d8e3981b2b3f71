-- Issue 39: a live job's swap holds the job's live row, not its own row (`store/live.rs`),
-- and checks what only the job's row holds as of its statement's start. A write that held
-- the live row first and changed the job's row is then seen by the swap's check of the
-- live row, which that write changed too; but if it left the live row's values exactly as
-- they were (its time in the same millisecond), only the job's row shows it, and the
-- swap's update of that row, which reads its latest version, finds it changed after the
-- live row was already written. The statement then fails with this error, so that
-- nothing of it is kept, and the swap is answered as one whose row changed.
CREATE FUNCTION swap_conflict() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the job''s row changed while its live row was held'
        USING ERRCODE = 'serialization_failure';
END;
$$;
