-- Pause, resume, retry from a step, and the approval gate before publish (PostgreSQL).
--
-- `paused`: a job stopped on a user's request with its work kept as a checkpoint. It holds
-- no lease, and neither the claim (queued only) nor the lease rescuer (running only) looks
-- at it, so no index changes. `awaiting_approval`: a job whose steps are done, stopped
-- before publishing until an operator approves or rejects it; it holds nothing either.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN
    ('queued', 'running', 'paused', 'awaiting_approval', 'succeeded', 'failed', 'cancelled',
         'dead_letter'));
ALTER TABLE jobs ADD CONSTRAINT jobs_waiting_holds_no_lease
    CHECK (status NOT IN ('paused', 'awaiting_approval') OR lease_expires_at IS NULL);

-- A pause asked of a running job, until its worker stops: contract::PauseRequest
-- (`requestedAt`, `requestedBy`, `immediate`). Written by transitions, like the cancel
-- columns, so it is compared by their compare-and-set.
ALTER TABLE jobs ADD COLUMN pause_requested jsonb
    CHECK (pause_requested IS NULL OR jsonb_typeof(pause_requested) = 'object');

-- Where the next attempt starts: the checkpoint its prepare stage restores
-- (contract::CheckpointSaved: `afterStep` or `afterIteration`, `baseCommit`, `artifact`).
-- NULL: from the start. Set by a pause, a resume and a retry from a step; kept through the
-- queue's own retries, so a flaky prepare does not lose the work.
ALTER TABLE jobs ADD COLUMN resume_from jsonb
    CHECK (resume_from IS NULL OR jsonb_typeof(resume_from) = 'object');

-- The approval gate of a task whose `task.publish.approval` is `required`:
-- contract::Approval (`requestedAt`, and `approvedBy`, `approvedAt` once approved). The
-- approved job's next attempt publishes the restored work without running a step again.
-- NULL while the job never reached the gate; cleared by a retry from a step.
ALTER TABLE jobs ADD COLUMN approval jsonb
    CHECK (approval IS NULL OR jsonb_typeof(approval) = 'object');
