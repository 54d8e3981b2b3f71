//! A worker's completion and its next claim written together (issue 39, step 3): one
//! statement, so one round trip, one commit and one WAL flush for both, and, through the
//! committer's line, for every other worker's that came at the same time. At a few workers
//! each commit otherwise waits on its own flush, and a job took two: its claim's and its
//! completion's.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool, Postgres, Row};

use super::claims::{Claim, Claimed, claim_all, claimed_row, stored};
use super::swaps::{
    SWAP_ANSWER, SWAP_ANSWER_JOINS, SWAP_ENDS_ANSWER, SWAP_ENDS_CTES, SWAP_JOBS_CTES,
    SWAP_SUCCEEDS_ANSWER, SWAP_SUCCEEDS_CTES, Statements, Swap, Swapped, batchable, bind_swaps,
    conflicted, id_order, swapped, write_jobs_if_unchanged,
};
use super::{Committer, Lent};
use crate::QueueError;
use crate::store::{Id, Ts};

/// A completion written as a swap (the row unchanged since it was read), then the claim,
/// made only if the swap was written.
#[derive(Debug, Clone)]
pub(crate) struct Finish {
    pub swap: Swap,
    pub claim: Claim,
}

/// What a [`Finish`] came to: the swap's answer and, when it was written, what the claim
/// leased (nothing claimed when it was not).
pub(crate) type Finished = (Swapped, Claimed);

/// The swaps of a batch of finishes (`$1`..`$40`, as `SWAP_JOBS_POSTGRES` takes them),
/// then the claims of those written, in one statement. The claims ask alike (one pick
/// serves them all): `$41`..`$43` are their slots, a claimer of N jobs having N in a row
/// (the number of its finish in the swaps' order, the worker, the lease's end), `$44` the
/// time, `$45`..`$47` the capabilities, types and repositories asked. `slots` keeps the
/// slots of the swaps written, renumbered (`finish_sql`); the pick takes as many jobs and
/// hands them out in claim order, the slots of the finishes that came first first. Every
/// swap's live row is taken by `gone` and its job's row written by `updated` before `slots`
/// reads which were, so the claims' event ids, drawn after the pick's locks, come after
/// the completions'. The claims write only live rows (`live.rs`). One row per job claimed,
/// with its finish's answer, and one for a finish that claimed none.
static FINISH_JOBS_POSTGRES: LazyLock<String> = LazyLock::new(|| {
    finish_sql(
        SWAP_JOBS_CTES,
        "row_number() OVER (ORDER BY s.k) AS k",
        "s.finish IN (SELECT n FROM updated)",
        &format!(
            "SELECT u.n, {SWAP_ANSWER}, c.* \
             FROM input AS u {SWAP_ANSWER_JOINS} LEFT JOIN claimed AS c ON c.finish = u.n \
             ORDER BY u.n, c.slot"
        ),
    )
});

/// [`FINISH_JOBS_POSTGRES`] for a batch of one, bound the same: its swap written as
/// `SWAP_ENDS_POSTGRES` writes one (no `unnest` of the swaps, no join with them, no answer
/// per row), then its claim, made only if the swap was written (`slots` reads `updated`,
/// so the claim's event ids are drawn after the completion's). At a few workers most
/// finishes come alone: this cut the finishes' server time per job by 5–10 % (README).
static FINISH_ONE_POSTGRES: LazyLock<String> =
    LazyLock::new(|| finish_one_sql(SWAP_ENDS_CTES, SWAP_ENDS_ANSWER));

/// [`FINISH_ONE_POSTGRES`] for a success kept in its row, which appends no event row
/// (`SWAP_SUCCEEDS_POSTGRES`): the finish of nearly every job.
static FINISH_SUCCEEDS_ONE_POSTGRES: LazyLock<String> =
    LazyLock::new(|| finish_one_sql(SWAP_SUCCEEDS_CTES, SWAP_SUCCEEDS_ANSWER));

/// The finish statement of one job: its swap's `WITH` and answer, then its claim.
fn finish_one_sql(swap: &str, answer: &str) -> String {
    finish_sql(
        swap,
        "s.k",
        "EXISTS (SELECT 1 FROM updated)",
        &format!(
            "SELECT 1::bigint AS n, {answer}, c.* \
             FROM (SELECT) AS u LEFT JOIN claimed AS c ON true ORDER BY c.slot"
        ),
    )
}

/// A finish statement: the swaps' `WITH` (`swaps`, which defines `updated`), the claim's
/// slots (`$41`..`$43`, numbered `k`, those `kept`: where the swap was written), the pick and
/// the claim (`claimed`, on the live rows), then `answer`. The claim finds the live rows by
/// the ids picked as a value computed once (`ANY((SELECT ...)::uuid[])`), which their index takes
/// as its condition: read from the pick's row by a join, the planner was free to walk every
/// live row instead, and did once the live table had been vacuumed while it was empty (its
/// statistics then say it holds nothing), for the life of the connection's generic plan.
/// A finish claims a few jobs, so `array_position` over them costs nothing.
fn finish_sql(swaps: &str, k: &str, kept: &str, answer: &str) -> String {
    format!(
        "{swaps}, \
         slots AS (SELECT s.finish, s.worker, s.lease, {k} \
           FROM unnest($41::bigint[], $42::text[], $43::timestamptz[]) \
             WITH ORDINALITY AS s(finish, worker, lease, k) \
           WHERE {kept}), \
         picked AS (SELECT ARRAY({pick}) AS ids), \
         claimed AS (UPDATE job_queue AS q SET {set} FROM picked, slots AS s, jobs AS j \
           WHERE q.id = ANY((SELECT ids FROM picked)::uuid[]) \
             AND s.k = array_position(picked.ids, q.id) AND j.id = q.id \
           RETURNING {columns}, q.claimed_event_id AS claimed_event_id, s.finish, \
             s.k AS slot) \
         {answer}",
        pick = claim_pick!(
            "$44",
            "$45",
            "$46",
            "$47",
            "(SELECT count(*) FROM slots)",
            ""
        ),
        set = claim_set!("s.worker", "s.lease", "$44"),
        columns = job_columns!(),
    )
}

/// The line that concurrent finishes wait in: a batch is one statement when its claims ask
/// alike, else one transaction. A batch that fails is written again one finish at a time,
/// so that each gets its own answer.
pub(crate) fn finish_committer(pool: PgPool) -> Committer<Finish, Finished> {
    Committer::gathering(
        pool,
        |finish: &Finish| Some(finish.swap.new.id.uuid()),
        |mut lent, finishes| async move {
            let all: Vec<&Finish> = finishes.iter().collect();
            let answers = match finish_on(&mut lent, &all).await {
                Ok(answers) => answers.into_iter().map(Ok).collect(),
                Err(error) if finishes.len() == 1 => vec![unless_conflicted(error)],
                Err(_) => {
                    let mut answers = Vec::with_capacity(finishes.len());
                    for finish in &finishes {
                        answers.push(match finish_on(&mut lent, &[finish]).await {
                            Ok(mut answer) => Ok(answer.remove(0)),
                            Err(error) => unless_conflicted(error),
                        });
                    }
                    answers
                }
            };
            (lent, answers)
        },
    )
}

/// A lone finish that failed: one whose swap failed on its guard (`swaps::conflicted`) kept
/// nothing, its statement or its transaction undone whole, and is one whose row changed.
fn unless_conflicted(error: QueueError) -> Result<Finished, QueueError> {
    if conflicted(&error) {
        Ok((None, Vec::new()))
    } else {
        Err(error)
    }
}

/// The batch on the finish line's connection; one answer per finish, in order. The
/// statements of one take only completions that end a live job ([`batchable`]); any other
/// finish takes the transaction, which writes a swap of any shape.
async fn finish_on(lent: &mut Lent, finishes: &[&Finish]) -> Result<Vec<Finished>, QueueError> {
    let first = &finishes[0].claim;
    let ends = |f: &&Finish| batchable(&f.swap.old, &f.swap.new);
    let alike = finishes.iter().all(|f| f.claim.alike(first) && ends(f));
    lent.run(async |conn| {
        if alike {
            finish_alike(conn, finishes).await
        } else {
            finish_in_transaction(conn, finishes).await
        }
    })
    .await
}

/// Finishes whose claims ask alike, in one statement ([`FINISH_JOBS_POSTGRES`], or
/// [`FINISH_ONE_POSTGRES`] for one).
async fn finish_alike(
    conn: &mut PgConnection,
    finishes: &[&Finish],
) -> Result<Vec<Finished>, QueueError> {
    let sql = match finishes {
        [one] if one.swap.keeps_its_success() => &FINISH_SUCCEEDS_ONE_POSTGRES,
        [_] => &FINISH_ONE_POSTGRES,
        _ => &FINISH_JOBS_POSTGRES,
    };
    let swaps: Vec<&Swap> = finishes.iter().map(|f| &f.swap).collect();
    let (query, order, now) = bound(sql, &swaps, finishes)?;
    let rows = query.fetch_all(conn).await?;
    let mut answers: Vec<Option<Swapped>> = vec![None; finishes.len()];
    let mut leased: Vec<Vec<(contract::Job, i64)>> = finishes.iter().map(|_| Vec::new()).collect();
    for row in &rows {
        let n: i64 = row.try_get("n")?;
        let caller = usize::try_from(n - 1)
            .ok()
            .and_then(|place| order.get(place).copied())
            .ok_or(sqlx::Error::RowNotFound)?;
        if answers[caller].is_none() {
            answers[caller] = Some(swapped(row, &finishes[caller].swap)?);
        }
        if row.try_get::<Option<Id>, _>("id")?.is_some() {
            leased[caller].push(claimed_row(row)?);
        }
    }
    answers
        .into_iter()
        .zip(leased)
        .map(|(answer, rows)| {
            let written = answer.ok_or(sqlx::Error::RowNotFound)?;
            Ok((written, stored(rows, now)))
        })
        .collect()
}

/// A finish statement bound, with the swaps' order (a finish's number in the statement is
/// its place there, from 1) and the claims' time.
type Bound<'q> = (Query<'q, Postgres, PgArguments>, Vec<usize>, DateTime<Utc>);

/// `sql` (a finish statement) bound to the finishes of `swaps`.
fn bound<'q>(
    sql: &'q str,
    swaps: &[&'q Swap],
    finishes: &[&'q Finish],
) -> Result<Bound<'q>, QueueError> {
    let order = id_order(swaps);
    // A finish's number in the statement is its place in the swaps' order, from 1.
    let mut number = vec![0_i64; finishes.len()];
    for (n, &caller) in order.iter().enumerate() {
        number[caller] = i64::try_from(n + 1).unwrap_or(i64::MAX);
    }
    let mut slot_finishes = Vec::new();
    let mut workers = Vec::new();
    let mut leases = Vec::new();
    for (caller, finish) in finishes.iter().enumerate() {
        for _ in 0..finish.claim.limit {
            slot_finishes.push(number[caller]);
            workers.push(finish.claim.worker_id.as_str());
            leases.push(finish.claim.lease_until);
        }
    }
    let now: DateTime<Utc> = finishes
        .iter()
        .map(|f| f.claim.now)
        .max()
        .expect("a batch is never empty");
    let first = &finishes[0].claim;
    let query = bind_swaps(sql, swaps, &order)?
        .bind(slot_finishes)
        .bind(workers)
        .bind(leases)
        .bind(Ts(now))
        .bind(Json(&first.capabilities))
        .bind(first.allowed_types.as_deref())
        .bind(first.allowed_repositories.as_deref());
    Ok((query, order, now))
}

/// Finishes whose claims differ, in one transaction: the swaps in one statement, then the
/// claims of those written, one statement per group that asks alike.
async fn finish_in_transaction(
    conn: &mut PgConnection,
    finishes: &[&Finish],
) -> Result<Vec<Finished>, QueueError> {
    let mut tx = sqlx::Connection::begin(conn).await?;
    let swaps: Vec<&Swap> = finishes.iter().map(|f| &f.swap).collect();
    let swapped = write_jobs_if_unchanged(&mut tx, &swaps, Statements::InTransaction).await?;
    let claims: Vec<&Claim> = finishes
        .iter()
        .zip(&swapped)
        .filter(|(_, written)| written.is_some())
        .map(|(finish, _)| &finish.claim)
        .collect();
    let mut claimed = claim_all(&mut tx, &claims).await?.into_iter();
    tx.commit().await?;
    Ok(swapped
        .into_iter()
        .map(|written| {
            let leased = match written {
                Some(_) => claimed.next().unwrap_or_default(),
                None => Vec::new(),
            };
            (written, leased)
        })
        .collect())
}

#[cfg(test)]
mod tests;
