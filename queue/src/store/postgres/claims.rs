//! The claim: pick and lease claimable jobs, their `job.claimed` kept in their rows, in
//! one statement, for one claimer or for several that ask alike and came at once.

use chrono::{DateTime, Utc};
use contract::{Job, JobEvent};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};

use super::{Committer, Lent};
use crate::QueueError;
use crate::machine;
use crate::store::claim_sql::{ClaimSql, claim_args, claim_order};
use crate::store::{Arg, PgDb, pg_rows};

/// The claim of one claimer: its pick (`claim_pick!`, `$extra` one more condition on the
/// candidate row) leased in the same statement, which writes only the live rows
/// (`live.rs`) and reads the jobs' own rows for the rest of what it answers. The pick's
/// lock re-checks its conditions, so the update needs no second `status = 'queued'` test.
/// The jobs' own rows are read as of the statement's start, unlocked: of a queued job only
/// its task can change without ending it (steps appended), and steps appended in the
/// instant of its claim reach the worker at its first step boundary, where it reads its
/// task again.
macro_rules! claim_postgres_sql {
    ($extra:literal) => {
        concat!(
            "UPDATE job_queue AS q SET ",
            claim_set!("$1", "$2", "$3"),
            " FROM jobs AS j WHERE j.id = q.id AND q.id = ANY(ARRAY(",
            claim_pick!("$3", "$4", "$5", "$6", "$7", $extra),
            ")) RETURNING ",
            job_columns!(),
            ", q.claimed_event_id AS claimed_event_id"
        )
    };
}

/// The PostgreSQL claim, its `job.claimed` kept in the live row, in one statement outside
/// an explicit transaction.
const CLAIM_POSTGRES: &str = claim_postgres_sql!("");

/// [`CLAIM_POSTGRES`] that also skips a job whose repository has `$8` jobs running
/// already. The count is only true while no other claim can add to it: see
/// [`REPOSITORY_LIMIT_LOCK`].
const CLAIM_POSTGRES_LIMITED: &str = claim_postgres_sql!(
    "AND (SELECT count(*) FROM job_queue r \
          WHERE r.repository = job_queue.repository AND r.status = 'running') < $8"
);

/// The advisory lock that claims under a repository limit take for their transaction.
/// `SKIP LOCKED` keeps two claimers off one row, not off two rows of one repository, and
/// each statement counts the running jobs as of its own start; so these claims take turns,
/// each counting after the one before it committed. Claims with no limit do not wait.
const REPOSITORY_LIMIT_LOCK: i64 = 0x5354_4550_5749_5345; // "STEPWISE"

/// [`CLAIM_POSTGRES`] for several claimers that ask alike: `$1` and `$2` are arrays, a
/// worker id and a lease end per slot (a claimer of N jobs has N slots, in a row); `$7` is
/// the number of slots. The jobs picked are handed to the slots in claim order, so the
/// claimers that came first are served first. `pick` locks every row before the update
/// works out a value, so the ids drawn there come after the lock, as in [`CLAIM_POSTGRES`].
///
/// A job's slot is its place in the pick, looked up by its id in an object built once
/// (`slots`, a binary search), where looking each id up in the pick's array
/// (`array_position`) made a statement's work grow with the square of its slots: a batched
/// claim of 500 jobs cost twice as much a job as one of 32. The live rows are found by the
/// ids picked as a value computed once (`ANY((SELECT ...)::uuid[])`), which their index takes as
/// its condition, not by a join with the pick: a join is the planner's to order, and once
/// the live table had been vacuumed while it was empty (its statistics then say it holds
/// nothing) its generic plan walked every live row, for each job picked.
const CLAIM_SLOTS_POSTGRES: &str = concat!(
    "WITH pick AS MATERIALIZED (SELECT ARRAY(",
    claim_pick!("$3", "$4", "$5", "$6", "$7", ""),
    ") AS ids), slots AS MATERIALIZED (SELECT jsonb_object_agg(p.id::text, p.slot) AS by_id \
       FROM pick, unnest(pick.ids) WITH ORDINALITY AS p(id, slot)) \
     UPDATE job_queue AS q SET ",
    claim_set!(
        "($1::text[])[(slots.by_id ->> q.id::text)::int]",
        "($2::timestamptz[])[(slots.by_id ->> q.id::text)::int]",
        "$3"
    ),
    " FROM slots, jobs AS j WHERE q.id = ANY((SELECT ids FROM pick)::uuid[]) AND j.id = q.id \
     RETURNING ",
    job_columns!(),
    ", q.claimed_event_id AS claimed_event_id, (slots.by_id ->> q.id::text)::int AS slot"
);

/// The jobs a claim leased, in claim order, each with its stored `job.claimed` event.
pub(crate) type Claimed = Vec<(Job, JobEvent)>;

/// A claim with no repository limit, owned, so that it can wait in the committer's line.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(super) worker_id: String,
    pub(super) capabilities: Vec<String>,
    pub(super) allowed_types: Option<Vec<String>>,
    pub(super) allowed_repositories: Option<Vec<String>>,
    pub(super) now: DateTime<Utc>,
    pub(super) lease_until: DateTime<Utc>,
    pub(super) limit: u32,
}

impl Claim {
    pub(crate) fn of(claim: &ClaimSql<'_>) -> Self {
        Claim {
            worker_id: claim.worker_id.to_string(),
            capabilities: claim.capabilities.to_vec(),
            allowed_types: claim.allowed_types.map(<[String]>::to_vec),
            allowed_repositories: claim.allowed_repositories.map(<[String]>::to_vec),
            now: claim.now,
            lease_until: claim.lease_until,
            limit: claim.limit,
        }
    }

    fn sql(&self) -> ClaimSql<'_> {
        ClaimSql {
            worker_id: &self.worker_id,
            capabilities: &self.capabilities,
            allowed_types: self.allowed_types.as_deref(),
            allowed_repositories: self.allowed_repositories.as_deref(),
            now: self.now,
            lease_until: self.lease_until,
            limit: self.limit,
            repository_limit: None,
        }
    }

    /// Whether one statement can serve both: the same jobs are claimable by each.
    pub(super) fn alike(&self, other: &Claim) -> bool {
        self.capabilities == other.capabilities
            && self.allowed_types == other.allowed_types
            && self.allowed_repositories == other.allowed_repositories
    }
}

/// The line that concurrent claims with no repository limit wait in: the claims of a
/// batch that ask alike share one statement, at the latest `now` among them. A statement
/// that fails is run again for each of its claims alone, so that each gets its own answer.
pub(crate) fn claim_committer(pool: PgPool) -> Committer<Claim, Claimed> {
    Committer::new(
        pool,
        |_: &Claim| None,
        |mut lent, claims| async move {
            let mut answers: Vec<Option<Result<Claimed, QueueError>>> =
                claims.iter().map(|_| None).collect();
            let all: Vec<&Claim> = claims.iter().collect();
            for group in alike(&all) {
                let together: Vec<&Claim> = group.iter().map(|&i| &claims[i]).collect();
                if together.len() > 1
                    && let Ok(shares) = claim_together_on(&mut lent, &together).await
                {
                    for (i, share) in group.iter().zip(shares) {
                        answers[*i] = Some(Ok(share));
                    }
                    continue;
                }
                for i in group {
                    answers[i] = Some(claim_one_on(&mut lent, &claims[i].sql()).await);
                }
            }
            let answers = answers
                .into_iter()
                .map(|answer| answer.expect("every claim of the batch was answered"))
                .collect();
            (lent, answers)
        },
    )
}

/// The claims of a batch by the positions of those that ask alike, in order.
fn alike(claims: &[&Claim]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, claim) in claims.iter().enumerate() {
        match groups.iter_mut().find(|g| claims[g[0]].alike(claim)) {
            Some(group) => group.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups
}

/// Every claim of a batch inside the caller's transaction, those that ask alike in one
/// statement; the jobs of each, in order. A failure fails them all: the transaction is
/// lost with it.
pub(super) async fn claim_all(
    conn: &mut PgConnection,
    claims: &[&Claim],
) -> Result<Vec<Claimed>, QueueError> {
    let mut answers: Vec<Claimed> = claims.iter().map(|_| Vec::new()).collect();
    for group in alike(claims) {
        let together: Vec<&Claim> = group.iter().map(|&i| claims[i]).collect();
        let shares = match together.as_slice() {
            [one] => vec![claim_one(conn, &one.sql()).await?],
            _ => claim_together(conn, &together).await?,
        };
        for (i, share) in group.into_iter().zip(shares) {
            answers[i] = share;
        }
    }
    Ok(answers)
}

/// [`claim_together`] on the claim line's connection, outside a transaction.
async fn claim_together_on(lent: &mut Lent, claims: &[&Claim]) -> Result<Vec<Claimed>, QueueError> {
    lent.run(async |conn| claim_together(conn, claims).await)
        .await
}

/// [`claim_one`] on the claim line's connection, outside a transaction.
async fn claim_one_on(lent: &mut Lent, claim: &ClaimSql<'_>) -> Result<Claimed, QueueError> {
    lent.run(async |conn| claim_one(conn, claim).await).await
}

/// Leases up to `claim.limit` jobs and records each claim's `job.claimed` event; returns
/// the jobs in claim order, each with its stored event. A claim with no repository limit
/// waits in the claim line (see [`claim_committer`]).
pub(crate) async fn claim(db: &PgDb, claim: &ClaimSql<'_>) -> Result<Claimed, QueueError> {
    match claim.repository_limit {
        None => db.claims.write(Claim::of(claim)).await,
        Some(_) => claim_alone(&db.pool, claim).await,
    }
}

/// Claims for several claimers that ask alike, in one statement: the jobs of each, in the
/// order of `claims`.
async fn claim_together(
    conn: &mut PgConnection,
    claims: &[&Claim],
) -> Result<Vec<Claimed>, QueueError> {
    let now = claims
        .iter()
        .map(|c| c.now)
        .max()
        .expect("a group is never empty");
    let mut workers = Vec::new();
    let mut leases = Vec::new();
    let mut owner = Vec::new();
    for (n, claim) in claims.iter().enumerate() {
        for _ in 0..claim.limit {
            workers.push(claim.worker_id.as_str());
            leases.push(claim.lease_until);
            owner.push(n);
        }
    }
    let first = claims[0];
    let rows = sqlx::query(CLAIM_SLOTS_POSTGRES)
        .bind(&workers)
        .bind(&leases)
        .bind(crate::store::Ts(now))
        .bind(sqlx::types::Json(&first.capabilities))
        .bind(first.allowed_types.as_deref())
        .bind(first.allowed_repositories.as_deref())
        .bind(i64::try_from(workers.len()).unwrap_or(i64::MAX))
        .fetch_all(conn)
        .await?;
    let mut shares: Vec<Vec<(Job, i64)>> = claims.iter().map(|_| Vec::new()).collect();
    for row in &rows {
        let slot: i32 = row.try_get("slot")?;
        let claimer = usize::try_from(slot - 1)
            .ok()
            .and_then(|s| owner.get(s))
            .ok_or(sqlx::Error::RowNotFound)?;
        shares[*claimer].push(claimed_row(row)?);
    }
    Ok(shares.into_iter().map(|rows| stored(rows, now)).collect())
}

/// A claimed row: the job and the id of the `job.claimed` its row keeps.
pub(super) fn claimed_row(row: &PgRow) -> Result<(Job, i64), sqlx::Error> {
    Ok((
        job_from_row!(row)?,
        row.try_get::<i64, _>("claimed_event_id")?,
    ))
}

/// One claimer's claim, in one statement, or under a repository limit one per job.
async fn claim_alone(pool: &PgPool, claim: &ClaimSql<'_>) -> Result<Claimed, QueueError> {
    let mut args = claim_args(claim)?;
    let rows = match claim.repository_limit {
        None => return claim_one(&mut *pool.acquire().await?, claim).await,
        Some(limit) => {
            // One job per statement, so that each counts the claims before it: a batch
            // never takes two jobs of a repository with room for one.
            args[6] = Arg::BigInt(1);
            args.push(Arg::BigInt(i64::from(limit)));
            let mut tx = pool.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(REPOSITORY_LIMIT_LOCK)
                .execute(&mut *tx)
                .await?;
            let mut rows = Vec::new();
            for _ in 0..claim.limit {
                let one = pg_rows(&mut tx, CLAIM_POSTGRES_LIMITED, &args, claimed_row).await?;
                if one.is_empty() {
                    break;
                }
                rows.extend(one);
            }
            tx.commit().await?;
            rows
        }
    };
    Ok(stored(rows, claim.now))
}

/// One claimer's claim with no repository limit, in one statement on `conn`.
async fn claim_one(conn: &mut PgConnection, claim: &ClaimSql<'_>) -> Result<Claimed, QueueError> {
    let args = claim_args(claim)?;
    let rows = pg_rows(conn, CLAIM_POSTGRES, &args, claimed_row).await?;
    Ok(stored(rows, claim.now))
}

/// The claimed jobs in claim order, each with its `job.claimed` event as kept at `now`.
pub(super) fn stored(mut rows: Vec<(Job, i64)>, now: DateTime<Utc>) -> Claimed {
    rows.sort_by(|(a, _), (b, _)| claim_order(a, b));
    rows.into_iter()
        .map(|(job, event_id)| {
            let event =
                machine::claimed_event(&job, job.lease_expires_at).stored(&job.id, event_id, now);
            (job, event)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use sqlx::types::Json;

    use crate::store::Ts;

    /// A burst of jobs into a table the planner has no statistics for yet: the claim must
    /// still walk job_queue_claim_order rather than sort every queued job.
    #[tokio::test]
    async fn postgres_claim_walks_the_claim_index_before_statistics_exist() {
        let (scratch, _db, pool) = super::super::scratch("stepwise_t_plan").await;
        let pool = &pool;
        super::super::queued_jobs(pool, 5000).await;
        let explain = format!("EXPLAIN {CLAIM_POSTGRES}");
        let one = || {
            sqlx::query_scalar::<_, String>(&explain)
                .bind("w")
                .bind(Ts(Utc::now()))
                .bind(Ts(Utc::now()))
                .bind(Json(vec!["codex".to_string()]))
                .bind(None::<Vec<String>>)
                .bind(None::<Vec<String>>)
                .bind(1_i64)
        };
        let plan = one().fetch_all(pool).await.unwrap().join("\n");
        assert!(
            plan.contains("Index Scan using job_queue_claim_order"),
            "{plan}"
        );
        assert!(!plan.contains("Sort"), "{plan}");
        assert!(!plan.contains("JIT"), "{plan}");
        // As the claim line's connections plan it, alone and for several claimers at once:
        // the job's own row read by its key, never a walk of every job.
        let mut conn = pool.acquire().await.unwrap();
        for setting in [
            "SET plan_cache_mode = force_generic_plan",
            "SET enable_sort = off",
        ] {
            sqlx::query(setting).execute(&mut *conn).await.unwrap();
        }
        let plan = one().fetch_all(&mut *conn).await.unwrap().join("\n");
        let slots = format!("EXPLAIN {CLAIM_SLOTS_POSTGRES}");
        let shared: Vec<String> = sqlx::query_scalar(&slots)
            .bind(vec!["w"; 2])
            .bind(vec![Utc::now(); 2])
            .bind(Ts(Utc::now()))
            .bind(Json(vec!["codex".to_string()]))
            .bind(None::<Vec<String>>)
            .bind(None::<Vec<String>>)
            .bind(2_i64)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        for plan in [plan, shared.join("\n")] {
            assert!(plan.contains("job_queue_claim_order"), "{plan}");
            assert!(!plan.contains("Seq Scan"), "{plan}");
            assert!(plan.contains("Index Scan using jobs_pkey"), "{plan}");
        }
        drop(conn);
        pool.close().await;
        scratch.drop_database().await.unwrap();
    }

    /// The live table vacuumed while it was empty (as the queue's own vacuum does between
    /// bursts: its statistics then say it holds nothing), then a burst of jobs, claimed by
    /// several claimers at once on a connection that plans the statement then: the live
    /// rows are still found by their ids, each once, never by a walk of the whole table
    /// for each job picked.
    #[tokio::test]
    async fn a_claim_for_many_claimers_finds_each_row_by_its_id_after_the_live_table_was_vacuumed_empty()
     {
        let (scratch, _db, pool) = super::super::scratch("stepwise_t_slots").await;
        sqlx::query("VACUUM (ANALYZE) job_queue")
            .execute(&pool)
            .await
            .unwrap();
        super::super::queued_jobs(&pool, 5000).await;
        let mut conn = pool.acquire().await.unwrap();
        for setting in [
            "SET plan_cache_mode = force_generic_plan",
            "SET enable_sort = off",
        ] {
            sqlx::query(setting).execute(&mut *conn).await.unwrap();
        }
        let slots = 500;
        let explain = format!("EXPLAIN (ANALYZE, COSTS OFF) {CLAIM_SLOTS_POSTGRES}");
        let plan: Vec<String> = sqlx::query_scalar(&explain)
            .bind(vec!["w"; slots])
            .bind(vec![Utc::now() + chrono::Duration::minutes(5); slots])
            .bind(Ts(Utc::now()))
            .bind(Json(vec!["codex".to_string()]))
            .bind(None::<Vec<String>>)
            .bind(None::<Vec<String>>)
            .bind(i64::try_from(slots).unwrap())
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let plan = plan.join("\n");
        // Picked once, and the live rows read by their key for the ids picked, once.
        assert_eq!(plan.matches("job_queue_claim_order").count(), 1, "{plan}");
        let by_ids = plan
            .lines()
            .find(|l| l.contains("on job_queue_pkey"))
            .unwrap_or_else(|| panic!("the live rows are not read by their key: {plan}"));
        assert!(by_ids.contains("rows=500 loops=1"), "{plan}");
        assert!(plan.contains("Index Cond: (id = ANY ($"), "{plan}");
        assert!(!plan.contains("Join Filter"), "{plan}");
        drop(conn);
        pool.close().await;
        scratch.drop_database().await.unwrap();
    }
}
