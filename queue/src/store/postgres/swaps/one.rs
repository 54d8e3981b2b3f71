//! One job's swaps, each shaped for how its transition moves between the job's two rows
//! (`live::Shape`), bound as the batched statement is (arrays of one). The macros they
//! share with the batched statement are `swaps.rs`'s.

/// One job's events appended after `$written` (the CTE naming the job's row if it was
/// written): `appended`.
macro_rules! one_appended {
    ($written:literal) => {
        concat!(
            "appended AS (\
       INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
       SELECT w.id, e.kind, e.level, e.message, e.payload, e.created_at \
       FROM ",
            $written,
            " AS w, unnest($35::text[], $36::text[], $37::text[], $38::jsonb[], \
         $39::timestamptz[]) WITH ORDINALITY AS e(kind, level, message, payload, created_at, k) \
       ORDER BY e.k \
       RETURNING id)"
        )
    };
}

/// One job's answer after [`one_appended!`]: whether it was written, and the new event
/// ids (a success kept in the row, `$kept`, last: the update drew it).
macro_rules! one_answer {
    ($written:literal, $kept:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM ",
            $written,
            ") AS written, ARRAY(SELECT id FROM appended ORDER BY id)",
            $kept,
            " AS event_ids"
        )
    };
}

/// [`one_appended!`] and [`one_answer!`], a whole statement's end.
macro_rules! one_appended_answer {
    ($written:literal, $kept:literal) => {
        concat!(
            one_appended!($written),
            " SELECT ",
            one_answer!($written, $kept)
        )
    };
}

/// One job's swap, bound as [`super::SWAP_JOBS_POSTGRES`] is (arrays of one; the events' job
/// positions, `$34`, all 1, go unread) but shaped for one row and for how the transition
/// moves between the job's two rows (`live::Shape`). The unnest, the join and the per-row
/// answers of the batched statement cost the server about a fifth of its CPU per claim +
/// complete, measured with pgbench.
///
/// A job that is not live and stays so (`Rests`): a plain update of its row, which takes
/// the row lock itself; its events draw their ids after it, reading its output.
pub(super) const SWAP_RESTS_POSTGRES: &str = concat!(
    "WITH updated AS (UPDATE jobs AS j SET ",
    set_states_from_one!(),
    " WHERE j.id = ($1::uuid[])[1] AND (j.status, j.attempt, j.next_attempt_at, \
       j.claimed_by, j.lease_expires_at, j.cancel_requested_at, \
       j.cancel_requested_by_user_id, j.cancel_reason, j.result_summary, j.error_message, \
       j.started_at, j.finished_at, j.updated_at, j.pause_requested, j.resume_from, \
       j.approval) \
       IS NOT DISTINCT FROM (($18::text[])[1], ($19::int[])[1], ($20::timestamptz[])[1], \
       ($21::text[])[1], ($22::timestamptz[])[1], ($23::timestamptz[])[1], ($24::text[])[1], \
       ($25::text[])[1], ($26::text[])[1], ($27::text[])[1], ($28::timestamptz[])[1], \
       ($29::timestamptz[])[1], ($30::timestamptz[])[1], ($31::jsonb[])[1], \
       ($32::jsonb[])[1], ($33::jsonb[])[1]) \
     RETURNING j.id), ",
    one_appended_answer!("updated", "")
);

/// A live job's swap that keeps it live: its live row, which every write of a live job
/// takes first, written if it and the job's row are as read: `live`.
macro_rules! live_written {
    () => {
        concat!(
            "WITH live AS (UPDATE job_queue AS q SET status = ($2::text[])[1], \
             attempt = ($3::int[])[1], next_attempt_at = ($4::timestamptz[])[1], \
             claimed_by = ($5::text[])[1], lease_expires_at = ($6::timestamptz[])[1], \
             started_at = ($12::timestamptz[])[1], updated_at = ($14::timestamptz[])[1] \
             WHERE q.id = ($1::uuid[])[1] AND ",
            live_unchanged!(one),
            " AND ",
            own_as_read!(one),
            " RETURNING q.id), "
        )
    };
}

/// A live job that stays live, changing only its live columns (a heartbeat): the live row
/// written if the job's two rows are as read; the job's row neither locked nor written.
pub(super) const SWAP_LIVES_POSTGRES: &str =
    concat!(live_written!(), one_appended_answer!("live", ""));

/// [`SWAP_LIVES_POSTGRES`] for a transition that changes what only the job's row holds as
/// well (a cancel or a pause asked of a running job): that row written too, after the
/// live row.
pub(super) const SWAP_LIVES_WRITTEN_POSTGRES: &str = concat!(
    live_written!(),
    "\
     updated AS (UPDATE jobs AS j SET ",
    set_states_from_one!(),
    " FROM live WHERE j.id = live.id AND ",
    own_unchanged!(one),
    " RETURNING j.id), ",
    one_appended_answer!("updated", ""),
    ", ",
    whole!("live", "updated")
);

/// A live job that ends (a success, a queued job cancelled): its live row deleted if the
/// job's two rows are as read, and then the job's row written whole, with the claim the
/// live row kept and, for a success kept in the row (`$40`), the success's id, drawn here
/// once the delete holds the live row (an event appended by a write that held it before
/// has the smaller id) and told to the webhook outbox (`told`). The job's row is not locked
/// first: its update takes the lock, in the order every write keeps (`live.rs`). No index
/// of `jobs` sees this write (migration 0025): it can go on the row's own page. The `WITH`
/// of `gone`, `updated` and `told`.
macro_rules! swap_ends_written {
    () => {
        concat!(
            "WITH gone AS (DELETE FROM job_queue AS q WHERE q.id = ($1::uuid[])[1] AND ",
            live_unchanged!(one),
            " AND ",
            own_as_read!(one),
            " RETURNING q.id, q.claimed_event_id, q.claimed_at, q.claim_lease_until), \
             updated AS (UPDATE jobs AS j SET ",
            set_states_from_one!(),
            ", claimed_event_id = gone.claimed_event_id, claimed_at = gone.claimed_at, \
               claim_lease_until = gone.claim_lease_until, \
               completed_event_id = CASE WHEN ($40::bool[])[1] \
                 THEN nextval('job_events_id_seq') ELSE j.completed_event_id END \
             FROM gone WHERE j.id = gone.id AND ",
            own_unchanged!(one),
            " RETURNING j.id, j.completed_event_id, j.finished_at), ",
            told_of_successes!("updated", "($40::bool[])[1]")
        )
    };
}

/// [`swap_ends_written!`] with the events appended (`appended`), for an end that writes
/// event rows (a queued job cancelled, a success that does not keep its event in the row).
macro_rules! swap_ends_ctes {
    () => {
        concat!(swap_ends_written!(), ", ", one_appended!("updated"))
    };
}

/// [`swap_ends_ctes!`]'s answer: whether the job was written, and its new event ids.
macro_rules! swap_ends_answer {
    () => {
        concat!(
            one_answer!(
                "updated",
                " || ARRAY(SELECT completed_event_id FROM updated WHERE ($40::bool[])[1])"
            ),
            ", ",
            whole!("gone", "updated")
        )
    };
}

/// A success kept in its row answers the id its update drew, with no `appended`: an
/// `INSERT` of no rows is still set up and run (its table and index opened) for nothing.
macro_rules! swap_succeeds_answer {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM updated) AS written, \
             ARRAY(SELECT completed_event_id FROM updated) AS event_ids, ",
            whole!("gone", "updated")
        )
    };
}

/// One live job ended, [`swap_ends_ctes!`] with its answer.
pub(super) const SWAP_ENDS_POSTGRES: &str =
    concat!(swap_ends_ctes!(), " SELECT ", swap_ends_answer!());

/// One live job's success kept in its row, the end most completions make.
pub(super) const SWAP_SUCCEEDS_POSTGRES: &str =
    concat!(swap_ends_written!(), " SELECT ", swap_succeeds_answer!());

/// [`SWAP_ENDS_POSTGRES`] up to its answer (the `WITH` of `gone`, `updated`,
/// `told` and `appended`) and its answer, and the same of [`SWAP_SUCCEEDS_POSTGRES`], for
/// the statements that claim after one finish (`finishes.rs`).
pub(in crate::store::postgres) const SWAP_ENDS_CTES: &str = swap_ends_ctes!();
pub(in crate::store::postgres) const SWAP_ENDS_ANSWER: &str = swap_ends_answer!();
pub(in crate::store::postgres) const SWAP_SUCCEEDS_CTES: &str = swap_ends_written!();
pub(in crate::store::postgres) const SWAP_SUCCEEDS_ANSWER: &str = swap_succeeds_answer!();
