-- A job's `job.claimed` is kept in its row too (issue 39, step 1; see 0021 for the
-- success): a claim no longer writes an event row and its index entries. The event says
-- who claimed, which attempt of how many, and until when; the row keeps the first two
-- (`claimed_by`, `attempt`, `max_attempts`) for as long as the claim stands, and these
-- columns keep the rest: the event's id, drawn from job_events' sequence under the row's
-- lock; when it was claimed; the lease the claim gave (heartbeats move
-- `lease_expires_at`). Readers build the event with the claim's own builder
-- (`machine::claimed_event`). A write that ends the attempt other than by succeeding (a
-- retry, a lost lease, a pause, a cancel, the approval gate), and the first write to a
-- succeeded job, writes the event out as a row under its id first and clears these.
-- NULL: no claim is kept (the job is not running, or its claim is a row).
ALTER TABLE jobs ADD COLUMN claimed_event_id bigint,
    ADD COLUMN claimed_at timestamptz,
    ADD COLUMN claim_lease_until timestamptz;
