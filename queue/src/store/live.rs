//! A job's live row (migration 0025): while a job is queued or leased it has a narrow
//! `job_queue` row holding its state (the columns of [`live_columns`]), which the claim
//! writes alone; its end deletes the live row and writes the job's own row once, with
//! no index of `jobs` to change. Where a job has a live row, readers take these columns
//! from it (`live!`, `job_columns!`) and the job's own of the same names are stale; the
//! kept `job.claimed` (`kept.rs`) is there too, moved to the job's row at its end. Every
//! write keeps three rules: a live job's live row is locked before its own row; a live
//! job's own row is written only by a write that holds its live row, and one that changes
//! what a swap checks there (`own_unchanged!`) writes the live row too; and a job has a
//! live row exactly when its state is queued or running. So the live row is the job's lock
//! while it lives: a swap that holds it needs no lock of the job's row (whose lock record
//! cost a success 55 bytes of WAL), and checks that row as of its statement's start. A
//! write it waited for is seen by its check of the live row, unless that write left the
//! live row's values as they were (its time in the same millisecond): then a swap that
//! writes the job's row finds the change there and fails whole (`whole!`), and a heartbeat,
//! which writes only the live row, answers without it (its worker learns of a cancel or a
//! pause asked in that millisecond at its next heartbeat). Three writes take a live row
//! alone, each one statement that waits on nothing once it holds the row: the claim
//! (which skips a locked one), a heartbeat, and a waiting job's release (`dependencies.rs`,
//! whose change of the live columns every swap of the job then sees).

use contract::{Job, JobState};

use super::{Arg, Database, Tx, TxConn, int, postgres};
use crate::QueueError;

/// Whether a job in `state` has a live row.
pub(crate) fn is_live(state: JobState) -> bool {
    matches!(state, JobState::Queued | JobState::Running)
}

/// How a transition moves between a job's two rows, which decides how a lock-free swap
/// writes it (`postgres/swaps.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Live before and after (a heartbeat, a cancel asked of a running job): its live row
    /// written, and the job's row only if what it alone holds changed.
    Lives,
    /// Live before, not after (a success, a queued job cancelled): the live row deleted,
    /// the job's row written whole.
    Ends,
    /// Live neither before nor after: only the job's row.
    Rests,
}

/// How a swap would write `old` becoming `new`; `None` when it would make the job live
/// again, which only a write under the lock does (it makes the live row).
pub(crate) fn shape(old: &Job, new: &Job) -> Option<Shape> {
    match (is_live(old.status), is_live(new.status)) {
        (true, true) => Some(Shape::Lives),
        (true, false) => Some(Shape::Ends),
        (false, false) => Some(Shape::Rests),
        (false, true) => None,
    }
}

/// Whether `old` and `new` agree in every column that only the job's row holds, the ones
/// a transition may change besides its live columns.
pub(crate) fn same_outside_live(old: &Job, new: &Job) -> bool {
    old.cancel_requested_at == new.cancel_requested_at
        && old.cancel_requested_by_user_id == new.cancel_requested_by_user_id
        && old.cancel_reason == new.cancel_reason
        && old.result_summary == new.result_summary
        && old.error_message == new.error_message
        && old.finished_at == new.finished_at
        && old.pause_requested == new.pause_requested
        && old.resume_from == new.resume_from
        && old.approval == new.approval
}

/// `$2`..`$8` of [`UPSERT_LIVE`]: the live columns a transition may change, in the order
/// of the live row (`next_attempt_at`, then what a claim writes).
pub(super) fn live_columns(job: &Job) -> [Arg<'_>; 7] {
    [
        Arg::at(job.next_attempt_at),
        Arg::text(job.status.as_str()),
        Arg::Int(int(job.attempt)),
        Arg::at(job.updated_at),
        Arg::Ts(job.started_at),
        Arg::opt(&job.claimed_by),
        Arg::Ts(job.lease_expires_at),
    ]
}

/// The live row of job `$1` made from its row (the columns it copies) and `$2`..`$8`, or
/// brought up to date. What it keeps of the claim is left to the claim and to `kept.rs`.
const UPSERT_LIVE: &str = "INSERT INTO job_queue (id, priority, created_at, job_type, \
     repository, required_capabilities, next_attempt_at, status, attempt, updated_at, \
     started_at, claimed_by, lease_expires_at) \
     SELECT id, priority, created_at, job_type, repository, required_capabilities, \
       $2, $3, $4, $5, $6, $7, $8 FROM jobs WHERE id = $1 \
     ON CONFLICT (id) DO UPDATE SET next_attempt_at = excluded.next_attempt_at, \
       status = excluded.status, attempt = excluded.attempt, \
       updated_at = excluded.updated_at, started_at = excluded.started_at, \
       claimed_by = excluded.claimed_by, lease_expires_at = excluded.lease_expires_at";

/// The claim that job `$1`'s live row keeps, moved to the job's row as the live row goes.
const MOVE_KEPT_CLAIM: &str = "UPDATE jobs SET claimed_event_id = q.claimed_event_id, \
     claimed_at = q.claimed_at, claim_lease_until = q.claim_lease_until \
     FROM job_queue AS q WHERE q.id = jobs.id AND jobs.id = $1 \
       AND q.claimed_event_id IS NOT NULL";

const DELETE_LIVE: &str = "DELETE FROM job_queue WHERE id = $1";

impl Tx {
    /// After `saved` were written to their rows, their live rows: written (made if it had
    /// none) for each job that is live, gone for each that is not, what it kept of the
    /// claim moved to the job's row.
    pub(super) async fn save_live(&mut self, saved: &[&Job]) -> Result<(), QueueError> {
        if let TxConn::Postgres(t) = &mut self.conn {
            return postgres::save_live(t, saved).await;
        }
        for job in saved {
            let id = Arg::Id(job.id.uuid());
            if is_live(job.status) {
                let mut args = vec![id];
                args.extend(live_columns(job));
                self.execute(UPSERT_LIVE, &args).await?;
            } else {
                self.execute(MOVE_KEPT_CLAIM, std::slice::from_ref(&id))
                    .await?;
                self.execute(DELETE_LIVE, &[id]).await?;
            }
        }
        Ok(())
    }

    /// The live row of a job just inserted, if it is live (SQLite; PostgreSQL makes it in
    /// the statement that inserts the job).
    pub(super) async fn insert_live(&mut self, job: &Job) -> Result<(), QueueError> {
        if !is_live(job.status) {
            return Ok(());
        }
        let mut args = vec![Arg::Id(job.id.uuid())];
        args.extend(live_columns(job));
        self.execute(UPSERT_LIVE, &args).await
    }
}

impl Database {
    /// How much of the live table is dead; `None` on SQLite, which removes a row's entries
    /// as it deletes or changes the row and has nothing to vacuum for the claim.
    pub(crate) async fn live_dead(&self) -> Result<Option<postgres::LiveDead>, sqlx::Error> {
        match self {
            Database::Sqlite(_) => Ok(None),
            Database::Postgres(db) => postgres::live_dead(&db.pool).await.map(Some),
        }
    }

    /// Vacuums the live table unless another replica is at it; whether it did (PostgreSQL;
    /// nothing on SQLite).
    pub(crate) async fn vacuum_live(&self) -> Result<bool, sqlx::Error> {
        match self {
            Database::Sqlite(_) => Ok(false),
            Database::Postgres(db) => postgres::vacuum_live(&db.pool).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state is live or not as the live row's own check says.
    #[test]
    fn the_live_states_are_those_the_live_row_admits() {
        let migration = include_str!("../../../migrations/postgres/0025_live_jobs.sql");
        for state in JobState::ALL {
            let admitted = migration.contains(&format!("status = '{state}'"));
            assert_eq!(admitted, is_live(state), "{state}");
        }
    }
}

/// What 0025 does to the jobs it finds: each queued and running one gets its live row,
/// with the claim its own row kept; an ended one keeps its own. On both backends.
#[cfg(test)]
mod migration {
    use super::*;
    use crate::store::{Database, Id, Ts};
    use chrono::{DateTime, Utc};
    use uuid::Uuid;

    const JOB: &str = "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
         required_capabilities, max_attempts, attempt, next_attempt_at, created_at, updated_at, \
         claimed_by, lease_expires_at, started_at, claimed_event_id, claimed_at, \
         claim_lease_until, finished_at, completed_event_id) \
         VALUES ($1, 'task', $2, 0, '{}', 'o/r', '[]', 3, $3, $4, $4, $4, $5, $6, $7, $8, $9, \
           $10, $11, $12)";

    async fn check(db: Database) {
        crate::migrate::run_before(&db, 25).await;
        let at = DateTime::<Utc>::from_timestamp_millis(1_700_000_000_000).unwrap();
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
        // Its state, attempt and worker, and the ids of the claim and success its row keeps.
        type Row = (
            &'static str,
            i32,
            Option<&'static str>,
            Option<i64>,
            Option<i64>,
        );
        let rows: [Row; 3] = [
            ("queued", 0, None, None, None),
            ("running", 1, Some("w1"), Some(7), None),
            ("succeeded", 1, Some("w1"), Some(8), Some(9)),
        ];
        for (id, (status, attempt, worker, claim, done)) in ids.iter().zip(rows) {
            let leased = (status == "running").then_some(Ts(at));
            let started = worker.map(|_| Ts(at));
            let finished = done.map(|_| Ts(at));
            on_pool!(&db, p => sqlx::query(JOB)
                .bind(Id(*id))
                .bind(status)
                .bind(attempt)
                .bind(Ts(at))
                .bind(worker)
                .bind(leased)
                .bind(started)
                .bind(claim)
                .bind(claim.map(|_| Ts(at)))
                .bind(claim.map(|_| Ts(at)))
                .bind(finished)
                .bind(done)
                .execute(p)
                .await
                .map(drop))
            .unwrap();
        }
        crate::migrate::run(&db).await.unwrap();
        let (queued, _) = db.kept_job(ids[0]).await.unwrap().unwrap();
        assert_eq!(queued.status, JobState::Queued);
        let (running, kept) = db.kept_job(ids[1]).await.unwrap().unwrap();
        assert_eq!(running.status, JobState::Running);
        assert_eq!(
            (running.attempt, running.claimed_by.as_deref()),
            (1, Some("w1"))
        );
        assert_eq!(running.lease_expires_at, Some(at));
        assert_eq!(kept.claimed.map(|c| c.id), Some(7));
        let (done, kept) = db.kept_job(ids[2]).await.unwrap().unwrap();
        assert_eq!(done.status, JobState::Succeeded);
        assert_eq!(
            (kept.claimed.map(|c| c.id), kept.completed),
            (Some(8), Some(9))
        );
        let count = |sql: &'static str| {
            let db = db.clone();
            async move {
                on_pool!(&db, p => sqlx::query_scalar::<_, i64>(sql).fetch_one(p).await).unwrap()
            }
        };
        assert_eq!(count("SELECT count(*) FROM job_queue").await, 2);
        assert_eq!(
            count("SELECT count(*) FROM jobs WHERE claimed_event_id IS NOT NULL").await,
            1,
            "the running job's claim moved to its live row"
        );
        let mut counts = db.count_by_status().await.unwrap();
        counts.sort();
        let expected = [("queued", 1), ("running", 1), ("succeeded", 1)];
        assert_eq!(counts, expected.map(|(s, n)| (s.to_string(), n)).to_vec());
    }

    #[tokio::test]
    async fn sqlite_gives_each_live_job_its_live_row() {
        let dir = tempfile::tempdir().unwrap();
        check(Database::open_data_dir(dir.path()).await.unwrap()).await;
    }

    #[tokio::test]
    async fn postgres_gives_each_live_job_its_live_row() {
        let admin = std::env::var("STEPWISE_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
        let scratch = crate::ScratchPostgres::create(&admin, "stepwise_t_0025")
            .await
            .unwrap();
        check(Database::open_url(scratch.url()).await.unwrap()).await;
        scratch.drop_database().await.unwrap();
    }
}
