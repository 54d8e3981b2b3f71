//! Transitions written without a lock taken first: each job's row is written back only if
//! it is still exactly as its writer read it, with the transition's events, many jobs in
//! one statement.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use contract::Job;
use sqlx::postgres::PgArguments;
use sqlx::postgres::PgRow;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row};

use super::bind_states;
use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::folds;
use crate::store::live::{Shape, same_outside_live, shape};

/// One transition to write: `new` over the row if the row still equals `old` in every field
/// a transition may change, with `events` appended, stamped `now`. Owned, so that it can
/// wait in the committer's queue; `old` shared, since it is the row the queue remembers
/// ([`LastWritten`](crate::last_written::LastWritten)) and no swap changes it.
#[derive(Debug, Clone)]
pub(crate) struct Swap {
    pub old: Arc<Job>,
    pub new: Job,
    pub events: Vec<PendingEvent>,
    pub now: DateTime<Utc>,
}

impl Swap {
    /// Whether the swap keeps its success in the job's row ([`folds`]), appending no event.
    pub(super) fn keeps_its_success(&self) -> bool {
        folds(&self.new, &self.events)
    }
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

/// The columns only a job's own row holds (`live.rs`), as read (`$23`.. of the swaps'
/// arguments) and compared with the row `j`: what a swap of a live job checks there, its
/// live row holding the rest. `$o` is how an argument is read (`[1]` of one job's array,
/// or a column `u.o_…` of the batch's input).
macro_rules! own_unchanged {
    (one) => {
        "(j.cancel_requested_at, j.cancel_requested_by_user_id, j.cancel_reason, \
         j.result_summary, j.error_message, j.finished_at, j.pause_requested, j.resume_from, \
         j.approval) IS NOT DISTINCT FROM (($23::timestamptz[])[1], ($24::text[])[1], \
         ($25::text[])[1], ($26::text[])[1], ($27::text[])[1], ($29::timestamptz[])[1], \
         ($31::jsonb[])[1], ($32::jsonb[])[1], ($33::jsonb[])[1])"
    };
    (batch) => {
        "(j.cancel_requested_at, j.cancel_requested_by_user_id, j.cancel_reason, \
         j.result_summary, j.error_message, j.finished_at, j.pause_requested, j.resume_from, \
         j.approval) IS NOT DISTINCT FROM (u.o_cancel_requested_at, \
         u.o_cancel_requested_by_user_id, u.o_cancel_reason, u.o_result_summary, \
         u.o_error_message, u.o_finished_at, u.o_pause_requested, u.o_resume_from, \
         u.o_approval)"
    };
}

/// The live columns as read, compared with the live row `q`.
macro_rules! live_unchanged {
    (one) => {
        "(q.status, q.attempt, q.next_attempt_at, q.claimed_by, q.lease_expires_at, \
         q.started_at, q.updated_at) IS NOT DISTINCT FROM (($18::text[])[1], ($19::int[])[1], \
         ($20::timestamptz[])[1], ($21::text[])[1], ($22::timestamptz[])[1], \
         ($28::timestamptz[])[1], ($30::timestamptz[])[1])"
    };
    (batch) => {
        "(q.status, q.attempt, q.next_attempt_at, q.claimed_by, q.lease_expires_at, \
         q.started_at, q.updated_at) IS NOT DISTINCT FROM (u.o_status, u.o_attempt, \
         u.o_next_attempt_at, u.o_claimed_by, u.o_lease_expires_at, u.o_started_at, \
         u.o_updated_at)"
    };
}

/// `SET` of every column a transition may change, from one job's arrays.
macro_rules! set_states_from_one {
    () => {
        "status = ($2::text[])[1], attempt = ($3::int[])[1], \
         next_attempt_at = ($4::timestamptz[])[1], claimed_by = ($5::text[])[1], \
         lease_expires_at = ($6::timestamptz[])[1], cancel_requested_at = ($7::timestamptz[])[1], \
         cancel_requested_by_user_id = ($8::text[])[1], cancel_reason = ($9::text[])[1], \
         result_summary = ($10::text[])[1], error_message = ($11::text[])[1], \
         started_at = ($12::timestamptz[])[1], finished_at = ($13::timestamptz[])[1], \
         updated_at = ($14::timestamptz[])[1], pause_requested = ($15::jsonb[])[1], \
         resume_from = ($16::jsonb[])[1], approval = ($17::jsonb[])[1]"
    };
}

/// Whether what only the job's row `j` of the live row `q` holds is as read, as of the
/// statement's start, unlocked: a write that changes it holds the live row and writes the
/// live row too (`live.rs`), so one that committed after the statement began, and was
/// waited for, fails the live row's check instead; one that left the live row's values as
/// they were is the guard's ([`whole!`]).
macro_rules! own_as_read {
    (one) => {
        concat!(
            "EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = q.id AND ",
            own_unchanged!(one),
            ")"
        )
    };
    (batch) => {
        concat!(
            "EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = q.id AND ",
            own_unchanged!(batch),
            ")"
        )
    };
}

/// The answer's guard where a swap writes the job's row after its live row (`$held`): the
/// update (`$written`) checks the row's latest version again, and if a write that held the
/// live row before changed the job's row and left the live row's values exactly as they
/// were, the update finds it changed once the live row is written. The statement then
/// fails (migration 0031's `swap_conflict`, a serialization failure), keeping nothing,
/// and the swap is answered as one whose row changed ([`conflicted`]).
macro_rules! whole {
    ($held:literal, $written:literal) => {
        concat!(
            "CASE WHEN (SELECT count(*) FROM ",
            $held,
            ") > (SELECT count(*) FROM ",
            $written,
            ") THEN swap_conflict() END AS conflict"
        )
    };
}

mod one;

pub(super) use one::{SWAP_ENDS_ANSWER, SWAP_ENDS_CTES, SWAP_SUCCEEDS_ANSWER, SWAP_SUCCEEDS_CTES};
use one::{
    SWAP_ENDS_POSTGRES, SWAP_LIVES_POSTGRES, SWAP_LIVES_WRITTEN_POSTGRES, SWAP_RESTS_POSTGRES,
    SWAP_SUCCEEDS_POSTGRES,
};

/// [`SWAP_JOBS_POSTGRES`] up to its answer: the `WITH` of `input`, `held`, `gone`,
/// `updated` (one row per swap written, with its position `n`) and `appended`, for a
/// statement that writes more after the swaps (`finishes.rs`). Every swap of a batch ends
/// a live job (`live::Shape::Ends`), as [`SWAP_ENDS_POSTGRES`] writes one.
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
         held AS (SELECT q.id FROM job_queue AS q WHERE q.id = ANY($1) \
           ORDER BY q.id FOR UPDATE), \
         gone AS (DELETE FROM job_queue AS q USING input AS u \
           WHERE q.id = ANY(ARRAY(SELECT id FROM held)) AND u.id = q.id AND ",
            live_unchanged!(batch),
            " AND ",
            own_as_read!(batch),
            " RETURNING q.id, q.claimed_event_id, q.claimed_at, q.claim_lease_until), \
         updated AS (UPDATE jobs AS j SET ",
            set_states_from_u!(),
            ", claimed_event_id = g.claimed_event_id, claimed_at = g.claimed_at, \
             claim_lease_until = g.claim_lease_until, \
             completed_event_id = CASE WHEN u.fold THEN nextval('job_events_id_seq') \
             ELSE j.completed_event_id END \
           FROM input AS u, gone AS g \
           WHERE j.id = u.id AND g.id = u.id AND ",
            own_unchanged!(batch),
            " \
           RETURNING u.n, u.id, u.fold, j.completed_event_id, j.finished_at), ",
            told_of_successes!("updated", "w.fold"),
            ", \
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
        concat!(
            "d.n IS NOT NULL AS written, \
             COALESCE(a.ids, '{}') || CASE WHEN d.fold THEN ARRAY[d.completed_event_id] \
               ELSE '{}'::bigint[] END AS event_ids, ",
            whole!("gone", "updated")
        )
    };
}

/// What [`swap_answer!`] reads, joined once to `input AS u` rather than looked up for
/// each swap by a subquery of its own: a batch of 32 ran 64 of them, each a scan of the
/// batch's rows or a sort of its events.
macro_rules! swap_answer_joins {
    () => {
        "LEFT JOIN updated AS d ON d.n = u.n \
         LEFT JOIN (SELECT job_id, array_agg(id ORDER BY id) AS ids FROM appended \
           GROUP BY job_id) AS a ON a.job_id = u.id"
    };
}

/// [`swap_jobs_ctes!`] and [`swap_answer!`], for a statement built at run time.
pub(super) const SWAP_JOBS_CTES: &str = swap_jobs_ctes!();
pub(super) const SWAP_ANSWER: &str = swap_answer!();
pub(super) const SWAP_ANSWER_JOINS: &str = swap_answer_joins!();

/// The swap of many jobs that each end (`live::Shape::Ends`): `$1` their ids, `$2`..`$17`
/// the new states, `$18`..`$33` the states as read, `$34`..`$39` the events (the position
/// of their job in the batch, from 1, then kind, level, message, payload and time), `$40`
/// whether each keeps its success in its row (its id drawn by the update, once `gone` holds
/// the live row). The jobs' live rows are locked in id order first (`held`: the ids come
/// sorted), so two batches, or a batch and a transaction that locks its jobs in id order,
/// cannot deadlock: a delete alone takes its rows in the order of its plan, which for a
/// small live table is the heap's. Each live row is then deleted if the job's two rows are
/// as read (`gone` reads `held` as an InitPlan), and each job's own row written after it,
/// in the order every write keeps (`live.rs`); a job whose rows changed since they were
/// read is left as it is. Both read the live rows by `= ANY` of the ids, which keeps the
/// planner, told not to sort, from walking the whole key for the order of the locks; `gone`
/// then joins `input` once and reads each job's own row by its key, where a subquery per
/// row with both rebuilt a hash of one row for every job and scanned the batch again. The
/// update locks each row before the insert draws its events' ids (the insert reads the
/// update's output), so a job's event ids still become visible in order. One answer row per job, in batch order:
/// whether it was written, and its new event ids.
const SWAP_JOBS_POSTGRES: &str = concat!(
    swap_jobs_ctes!(),
    " SELECT u.n, ",
    swap_answer!(),
    " FROM input AS u ",
    swap_answer_joins!(),
    " ORDER BY u.n"
);

/// Whether a swap may share a batch: every swap of a batch ends a live job.
pub(crate) fn batchable(old: &Job, new: &Job) -> bool {
    shape(old, new) == Some(Shape::Ends)
}

/// Where a swap's statements run: each on its own, committing alone, so that one that
/// failed on its guard ([`whole!`]) kept nothing and is answered as a row that changed; or
/// inside a transaction, whose failure it then is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statements {
    Alone,
    InTransaction,
}

/// Writes each swap whose rows are unchanged, in one statement; one answer per swap, in the
/// order given. Two swaps of one job cannot share a batch: the second would be checked
/// against the row as it was before the first. A batch of more than one holds only
/// [`batchable`] swaps. Run [`Statements::Alone`], a batch that failed on its guard is
/// written again one swap at a time, so that only the swap whose row changed answers so.
pub(crate) async fn write_jobs_if_unchanged(
    conn: &mut PgConnection,
    swaps: &[&Swap],
    run: Statements,
) -> Result<Vec<Swapped>, QueueError> {
    let (together, alone): (Vec<usize>, Vec<usize>) =
        (0..swaps.len()).partition(|&i| swaps.len() > 1 && batchable(&swaps[i].old, &swaps[i].new));
    let mut answers: Vec<Swapped> = vec![None; swaps.len()];
    // Those of other shapes (a heartbeat among the successes of a committer's line) go one
    // statement each: every statement is atomic on its own, and each answers its own.
    for i in alone.into_iter().chain(if together.len() == 1 {
        together.clone()
    } else {
        Vec::new()
    }) {
        answers[i] = write_one(conn, swaps[i], run).await?;
    }
    if together.len() > 1 {
        let batch: Vec<&Swap> = together.iter().map(|&i| swaps[i]).collect();
        let order = id_order(&batch);
        let rows = match bind_swaps(SWAP_JOBS_POSTGRES, &batch, &order)?
            .fetch_all(&mut *conn)
            .await
            .map_err(QueueError::from)
        {
            Err(error) if run == Statements::Alone && conflicted(&error) => {
                for &i in &together {
                    answers[i] = write_one(conn, swaps[i], run).await?;
                }
                return Ok(answers);
            }
            rows => rows?,
        };
        if rows.len() != batch.len() {
            return Err(sqlx::Error::RowNotFound.into());
        }
        for (row, &place) in rows.iter().zip(&order) {
            answers[together[place]] = swapped(row, batch[place])?;
        }
    }
    Ok(answers)
}

/// One swap by the statement of its shape.
async fn write_one(
    conn: &mut PgConnection,
    swap: &Swap,
    run: Statements,
) -> Result<Swapped, QueueError> {
    let sql = match shape(&swap.old, &swap.new) {
        Some(Shape::Rests) => SWAP_RESTS_POSTGRES,
        Some(Shape::Lives) if same_outside_live(&swap.old, &swap.new) => SWAP_LIVES_POSTGRES,
        Some(Shape::Lives) => SWAP_LIVES_WRITTEN_POSTGRES,
        Some(Shape::Ends) if swap.keeps_its_success() => SWAP_SUCCEEDS_POSTGRES,
        Some(Shape::Ends) => SWAP_ENDS_POSTGRES,
        None => unreachable!("a swap that makes a job live again is not swappable"),
    };
    let one = [swap];
    match bind_swaps(sql, &one, &[0])?.fetch_one(&mut *conn).await {
        Ok(row) => swapped(&row, swap),
        Err(error) => {
            let error = QueueError::from(error);
            if run == Statements::Alone && conflicted(&error) {
                Ok(None)
            } else {
                Err(error)
            }
        }
    }
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
    let folds: Vec<bool> = sorted.iter().map(|s| s.keeps_its_success()).collect();
    let query = sqlx::query(sql).bind(ids);
    let query = bind_states(query, sorted.iter().map(|s| &s.new))?;
    let query = bind_states(query, sorted.iter().map(|s| &*s.old))?;
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

/// Whether `error` is a swap's statement failing on its guard ([`whole!`]): nothing of it
/// was kept, and the swap is answered as one whose row changed, once the statement ran
/// on its own (in a transaction, the transaction failed with it).
pub(super) fn conflicted(error: &QueueError) -> bool {
    matches!(error, QueueError::Database(sqlx::Error::Database(e))
        if e.code().as_deref() == Some("40001"))
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

#[cfg(test)]
mod races;
#[cfg(test)]
mod tests;
