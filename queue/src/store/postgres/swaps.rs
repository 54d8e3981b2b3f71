//! Transitions written without a lock taken first: each job's row is written back only if
//! it is still exactly as its writer read it, with the transition's events, many jobs in
//! one statement.

use chrono::{DateTime, Utc};
use contract::Job;
use sqlx::postgres::PgArguments;
use sqlx::postgres::PgRow;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row};

use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::{folds, int};

/// One transition to write: `new` over the row if the row still equals `old` in every field
/// a transition may change, with `events` appended, stamped `now`. Owned, so that it can
/// wait in the committer's queue.
#[derive(Debug, Clone)]
pub(crate) struct Swap {
    pub old: Job,
    pub new: Job,
    pub events: Vec<PendingEvent>,
    pub now: DateTime<Utc>,
}

/// What a [`Swap`] came to: `None` when the row had changed since it was read (nothing
/// written); otherwise the ids of its events, in order.
pub(crate) type Swapped = Option<Vec<i64>>;

/// The columns a transition may change, bound as one array each, in this order.
macro_rules! state_columns {
    () => {
        "status, attempt, next_attempt_at, claimed_by, lease_expires_at, cancel_requested_at, \
         cancel_requested_by_user_id, cancel_reason, result_summary, error_message, \
         started_at, finished_at, updated_at, pause_requested, resume_from, approval"
    };
}

/// One job's swap, bound as [`SWAP_JOBS_POSTGRES`] is (arrays of one; the events' job
/// positions, `$34`, all 1, go unread) but shaped for one row: a plain update of that row
/// with its events appended. The unnest, the join and the per-row answers of the batched
/// statement cost the server about a fifth of its CPU per claim + complete, measured with
/// pgbench. `$lock` and `$from` are [`SWAP_JOB_POSTGRES`]'s and
/// [`SWAP_JOB_KEEPING_POSTGRES`]'s difference.
macro_rules! swap_job_sql {
    ($lock:literal, $from:literal) => {
        concat!(
            "WITH ",
            $lock,
            "updated AS (UPDATE jobs AS j SET \
       status = ($2::text[])[1], attempt = ($3::int[])[1], \
       next_attempt_at = ($4::timestamptz[])[1], claimed_by = ($5::text[])[1], \
       lease_expires_at = ($6::timestamptz[])[1], cancel_requested_at = ($7::timestamptz[])[1], \
       cancel_requested_by_user_id = ($8::text[])[1], cancel_reason = ($9::text[])[1], \
       result_summary = ($10::text[])[1], error_message = ($11::text[])[1], \
       started_at = ($12::timestamptz[])[1], finished_at = ($13::timestamptz[])[1], \
       updated_at = ($14::timestamptz[])[1], pause_requested = ($15::jsonb[])[1], \
       resume_from = ($16::jsonb[])[1], approval = ($17::jsonb[])[1], \
       completed_event_id = CASE WHEN ($40::bool[])[1] THEN nextval('job_events_id_seq') \
         ELSE j.completed_event_id END ",
            $from,
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
     RETURNING j.id, j.completed_event_id), \
   appended AS (\
     INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
     SELECT updated.id, e.kind, e.level, e.message, e.payload, e.created_at \
     FROM updated, unnest($35::text[], $36::text[], $37::text[], $38::jsonb[], \
       $39::timestamptz[]) WITH ORDINALITY AS e(kind, level, message, payload, created_at, k) \
     ORDER BY e.k \
     RETURNING id) \
   SELECT EXISTS (SELECT 1 FROM updated) AS written, \
     ARRAY(SELECT id FROM appended ORDER BY id) \
       || ARRAY(SELECT completed_event_id FROM updated WHERE ($40::bool[])[1]) AS event_ids"
        )
    };
}

/// The update takes the row lock itself, so this swap is spared the lock's own WAL record;
/// its events draw their ids after it, reading its output. For a swap that keeps no
/// success in the row (`$40` false).
const SWAP_JOB_POSTGRES: &str = swap_job_sql!("", "");

/// [`SWAP_JOB_POSTGRES`] for a success kept in the row (`$40` true): the id it draws must
/// come after the lock, as an appended event's does, and an update works out its new values
/// before it waits for a lock held by a writer that changed nothing of the row (one that
/// only appended an event, whose id would then be the greater one, visible first). So the
/// row is locked first, as the batched swap does.
const SWAP_JOB_KEEPING_POSTGRES: &str = swap_job_sql!(
    "locked AS (SELECT id FROM jobs WHERE id = ($1::uuid[])[1] FOR UPDATE), ",
    "FROM locked"
);

/// [`SWAP_JOBS_POSTGRES`] up to its answer: the `WITH` of `input`, `locked`, `updated` (one
/// row per swap written, with its position `n`) and `appended`, for a statement that
/// writes more after the swaps (`finishes.rs`).
macro_rules! swap_jobs_ctes {
    () => {
        concat!(
            "WITH input AS (SELECT * FROM unnest($1::uuid[], \
           $2::text[], $3::int[], $4::timestamptz[], $5::text[], $6::timestamptz[], \
           $7::timestamptz[], $8::text[], $9::text[], $10::text[], $11::text[], \
           $12::timestamptz[], $13::timestamptz[], $14::timestamptz[], $15::jsonb[], \
           $16::jsonb[], $17::jsonb[], \
           $18::text[], $19::int[], $20::timestamptz[], $21::text[], $22::timestamptz[], \
           $23::timestamptz[], $24::text[], $25::text[], $26::text[], $27::text[], \
           $28::timestamptz[], $29::timestamptz[], $30::timestamptz[], $31::jsonb[], \
           $32::jsonb[], $33::jsonb[], $40::bool[]) WITH ORDINALITY AS u(id, ",
        state_columns!(),
        ", o_status, o_attempt, o_next_attempt_at, o_claimed_by, o_lease_expires_at, \
           o_cancel_requested_at, o_cancel_requested_by_user_id, o_cancel_reason, \
           o_result_summary, o_error_message, o_started_at, o_finished_at, o_updated_at, \
           o_pause_requested, o_resume_from, o_approval, fold, n)), \
         locked AS (SELECT id FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE), \
         updated AS (UPDATE jobs AS j SET ",
        set_states_from_u!(),
        ", completed_event_id = CASE WHEN u.fold THEN nextval('job_events_id_seq') \
             ELSE j.completed_event_id END \
           FROM input AS u, locked \
           WHERE j.id = u.id AND locked.id = u.id \
             AND (j.status, j.attempt, j.next_attempt_at, j.claimed_by, \
             j.lease_expires_at, j.cancel_requested_at, j.cancel_requested_by_user_id, \
             j.cancel_reason, j.result_summary, j.error_message, j.started_at, j.finished_at, \
             j.updated_at, j.pause_requested, j.resume_from, j.approval) \
             IS NOT DISTINCT FROM (u.o_status, u.o_attempt, u.o_next_attempt_at, u.o_claimed_by, \
             u.o_lease_expires_at, u.o_cancel_requested_at, u.o_cancel_requested_by_user_id, \
             u.o_cancel_reason, u.o_result_summary, u.o_error_message, u.o_started_at, \
             u.o_finished_at, u.o_updated_at, u.o_pause_requested, u.o_resume_from, u.o_approval) \
           RETURNING u.n, u.id, u.fold, j.completed_event_id), \
         appended AS (\
           INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
           SELECT updated.id, e.kind, e.level, e.message, e.payload, e.created_at \
           FROM unnest($34::bigint[], $35::text[], $36::text[], $37::text[], $38::jsonb[], \
             $39::timestamptz[]) WITH ORDINALITY AS e(job, kind, level, message, payload, \
             created_at, k) \
           JOIN updated ON updated.n = e.job \
           ORDER BY e.k \
           RETURNING id, job_id)"
        )
    };
}

/// A swap's answer, read by [`swapped`], for each `input AS u` of [`swap_jobs_ctes!`]:
/// whether it was written, and its new event ids.
macro_rules! swap_answer {
    () => {
        "EXISTS (SELECT 1 FROM updated WHERE updated.n = u.n) AS written, \
         ARRAY(SELECT a.id FROM appended AS a WHERE a.job_id = u.id ORDER BY a.id) \
           || ARRAY(SELECT d.completed_event_id FROM updated AS d WHERE d.n = u.n AND d.fold) \
           AS event_ids"
    };
}

/// [`swap_jobs_ctes!`] and [`swap_answer!`], for a statement built at run time.
pub(super) const SWAP_JOBS_CTES: &str = swap_jobs_ctes!();
pub(super) const SWAP_ANSWER: &str = swap_answer!();

/// The swap of many jobs: `$1` their ids, `$2`..`$17` the new states, `$18`..`$33` the
/// states as read, `$34`..`$39` the events (the position of their job in the batch, from 1,
/// then kind, level, message, payload and time), `$40` whether each keeps its success in
/// its row (its id drawn by the update, after `locked` took the row). Each job's row is
/// locked in id order first (the ids come sorted), so two batches, or a batch and a
/// transaction that locks its jobs in id order, cannot deadlock; a row that changed since
/// it was read is locked and left as it is. The update locks each row before the insert
/// draws its events' ids (the insert reads the update's output), so a job's event ids
/// still become visible in order. One answer row per job, in batch order: whether it was
/// written, and its new event ids.
const SWAP_JOBS_POSTGRES: &str = concat!(
    swap_jobs_ctes!(),
    " SELECT u.n, ",
    swap_answer!(),
    " FROM input AS u ORDER BY u.n"
);

/// Writes each swap whose row is unchanged, in one statement; one answer per swap, in the
/// order given. Two swaps of one job cannot share a batch: the second would be checked
/// against the row as it was before the first.
pub(crate) async fn write_jobs_if_unchanged(
    conn: &mut PgConnection,
    swaps: &[&Swap],
) -> Result<Vec<Swapped>, QueueError> {
    let order = id_order(swaps);
    let sql = match swaps {
        [one] if !folds(&one.new, &one.events) => SWAP_JOB_POSTGRES,
        [_] => SWAP_JOB_KEEPING_POSTGRES,
        _ => SWAP_JOBS_POSTGRES,
    };
    let rows = bind_swaps(sql, swaps, &order)?.fetch_all(conn).await?;
    if rows.len() != swaps.len() {
        return Err(sqlx::Error::RowNotFound.into());
    }
    let mut answers: Vec<Swapped> = vec![None; swaps.len()];
    for (row, &caller) in rows.iter().zip(&order) {
        answers[caller] = swapped(row, swaps[caller])?;
    }
    Ok(answers)
}

/// The swaps' positions in id order: the order their rows are locked in, whatever order
/// the callers came in. A swap's number in the statements (`n`, from 1) is its place here.
pub(super) fn id_order(swaps: &[&Swap]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..swaps.len()).collect();
    order.sort_by_key(|&i| swaps[i].new.id.uuid());
    order
}

/// `sql` with the swaps bound as `$1`..`$40` of [`SWAP_JOBS_POSTGRES`], in `order`.
pub(super) fn bind_swaps<'q>(
    sql: &'q str,
    swaps: &[&'q Swap],
    order: &[usize],
) -> Result<Query<'q, Postgres, PgArguments>, QueueError> {
    let sorted: Vec<&'q Swap> = order.iter().map(|&i| swaps[i]).collect();
    let ids: Vec<_> = sorted.iter().map(|s| s.new.id.uuid()).collect();
    let folds: Vec<bool> = sorted.iter().map(|s| folds(&s.new, &s.events)).collect();
    let query = sqlx::query(sql).bind(ids);
    let query = bind_states(query, sorted.iter().map(|s| &s.new))?;
    let query = bind_states(query, sorted.iter().map(|s| &s.old))?;
    let events = || {
        sorted
            .iter()
            .zip(&folds)
            .enumerate()
            .flat_map(|(n, (swap, &fold))| {
                let position = i64::try_from(n + 1).unwrap_or(i64::MAX);
                // A success kept in the row is not appended: the update draws its id.
                let appended = if fold { &[][..] } else { &swap.events[..] };
                appended.iter().map(move |e| (position, e, swap.now))
            })
    };
    Ok(query
        .bind(events().map(|(n, _, _)| n).collect::<Vec<_>>())
        .bind(
            events()
                .map(|(_, e, _)| e.kind.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            events()
                .map(|(_, e, _)| e.level.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            events()
                .map(|(_, e, _)| e.message.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            events()
                .map(|(_, e, _)| Json(&e.payload))
                .collect::<Vec<_>>(),
        )
        .bind(events().map(|(_, _, now)| now).collect::<Vec<_>>())
        .bind(folds))
}

/// A swap's answer from its row of the statement (`written`, `event_ids`): its event ids
/// when it was written, which must be one per event it wrote.
pub(super) fn swapped(row: &PgRow, swap: &Swap) -> Result<Swapped, QueueError> {
    let written: bool = row.try_get("written")?;
    if !written {
        return Ok(None);
    }
    let ids: Vec<i64> = row.try_get("event_ids")?;
    if ids.len() != swap.events.len() {
        return Err(sqlx::Error::RowNotFound.into());
    }
    Ok(Some(ids))
}

/// Binds the sixteen columns a transition may change, one array each, in the order of
/// `state_columns!`.
pub(super) fn bind_states<'q, 'j>(
    query: Query<'q, Postgres, PgArguments>,
    jobs: impl Iterator<Item = &'j Job> + Clone,
) -> Result<Query<'q, Postgres, PgArguments>, QueueError> {
    let text = |f: fn(&Job) -> Option<String>| jobs.clone().map(f).collect::<Vec<_>>();
    let at = |f: fn(&Job) -> Option<DateTime<Utc>>| jobs.clone().map(f).collect::<Vec<_>>();
    let json = |f: fn(&Job) -> Option<serde_json::Result<serde_json::Value>>| {
        jobs.clone()
            .map(|j| f(j).transpose().map(|v| v.map(Json)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| QueueError::from(crate::store::decode_err(e)))
    };
    Ok(query
        .bind(text(|j| Some(j.status.as_str().to_string())))
        .bind(jobs.clone().map(|j| int(j.attempt)).collect::<Vec<_>>())
        .bind(at(|j| Some(j.next_attempt_at)))
        .bind(text(|j| j.claimed_by.clone()))
        .bind(at(|j| j.lease_expires_at))
        .bind(at(|j| j.cancel_requested_at))
        .bind(text(|j| j.cancel_requested_by_user_id.clone()))
        .bind(text(|j| j.cancel_reason.clone()))
        .bind(text(|j| j.result_summary.clone()))
        .bind(text(|j| j.error_message.clone()))
        .bind(at(|j| j.started_at))
        .bind(at(|j| j.finished_at))
        .bind(at(|j| Some(j.updated_at)))
        .bind(json(|j| {
            j.pause_requested.as_ref().map(serde_json::to_value)
        })?)
        .bind(json(|j| j.resume_from.as_ref().map(serde_json::to_value))?)
        .bind(json(|j| j.approval.as_ref().map(serde_json::to_value))?))
}
