//! The lock-free swaps on a real PostgreSQL: what each shape writes, and what it leaves.

use super::*;
use crate::lease::Fence;
use crate::machine::{self, Outcome};
use crate::{ClaimRequest, Queue, QueueConfig};
use serde_json::json;
use sqlx::PgPool;

/// What worker `w` claims with in these tests.
pub(super) fn request() -> ClaimRequest {
    ClaimRequest {
        worker_id: "w".into(),
        capabilities: vec!["codex".into(), "git".into()],
        allowed_types: None,
        allowed_repositories: None,
        lease: std::time::Duration::from_secs(60),
        max_running_per_repository: None,
    }
}

/// A queue on a scratch database named after `name`, and its pool.
pub(super) async fn scratch_queue(name: &str) -> (crate::ScratchPostgres, Queue, PgPool) {
    let (scratch, db, pool) = super::super::scratch(name).await;
    let queue = Queue::open(db, QueueConfig::new(std::env::temp_dir()))
        .await
        .unwrap();
    (scratch, queue, pool)
}

/// The plain task the tests queue.
pub(super) fn task() -> serde_json::Value {
    json!({ "type": "task", "payload": { "repository": "octo/repo",
        "task": { "instructions": "x", "publish": { "mode": "none" } } } })
}

/// The version of the job's own row: unchanged while nothing wrote it.
async fn version(pool: &PgPool, job: &Job) -> String {
    sqlx::query_scalar("SELECT xmin::text FROM jobs WHERE id = $1")
        .bind(job.id.uuid())
        .fetch_one(pool)
        .await
        .unwrap()
}

pub(super) fn completed(job: &Job) -> Swap {
    let now = Utc::now();
    let mut new = job.clone();
    let fence = Fence::of(job).unwrap();
    let Ok(Outcome::Changed { events, .. }) = machine::complete(&mut new, &fence, now, None) else {
        panic!("a running job completes")
    };
    Swap {
        old: Arc::new(job.clone()),
        new,
        events,
        now,
    }
}

/// The running `jobs` completed by one lock-free swap, committed: how many updates of the
/// jobs' rows it made, and how many of those in place (HOT).
async fn completed_in_one_transaction(pool: &PgPool, jobs: &[Job]) -> (i64, i64) {
    let swaps: Vec<Swap> = jobs.iter().map(completed).collect();
    let swaps: Vec<&Swap> = swaps.iter().collect();
    let mut tx = pool.begin().await.unwrap();
    let written = write_jobs_if_unchanged(&mut tx, &swaps, Statements::InTransaction)
        .await
        .unwrap();
    assert!(written.iter().all(Option::is_some), "{written:?}");
    let counts = sqlx::query_as(
        "SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass), \
         pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    counts
}

/// Issue 39, step 2: a claim leaves the job's own row as it was (it writes the live
/// row alone), and a success is one update of that row that no index sees, which
/// PostgreSQL writes in place (HOT), alone or in a batch.
#[tokio::test]
async fn a_claim_leaves_the_job_s_row_and_a_success_updates_it_once_in_place() {
    let (scratch, queue, pool) = scratch_queue("stepwise_t_hot").await;
    let task = task();
    let mut created = Vec::new();
    for _ in 0..3 {
        created.push(queue.create_job(&task, Some("alice")).await.unwrap());
    }
    let request = request();
    let mut claimed = Vec::new();
    for job in &created {
        let before = version(&pool, job).await;
        claimed.push(queue.claim(&request).await.unwrap().unwrap());
        assert_eq!(
            version(&pool, job).await,
            before,
            "the claim wrote the job's row"
        );
    }
    for (swaps, n) in [(&claimed[..1], 1_i64), (&claimed[1..], 2)] {
        assert_eq!(
            completed_in_one_transaction(&pool, swaps).await,
            (n, n),
            "updates of the jobs' rows, and in place"
        );
    }
    for job in &created {
        let done = queue.get_job(&job.id).await.unwrap();
        assert_eq!(done.status, contract::JobState::Succeeded);
    }
    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM job_queue")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(live, 0, "no live row outlives its job's end");
    // Not `pool.close()`: the queue's own tasks may hold a connection to the end.
    scratch.drop_database().await.unwrap();
}

/// The batched swap, planned as the queue's connections plan it (generic, sorts
/// discouraged), reads the rows of its own jobs by their key, however many other jobs
/// there are: a join with its input once had the planner walk every job for the order
/// of its locks, a second per batch of 32 at 30,000 jobs. Its live rows are locked along
/// the live table's key, so in id order.
#[tokio::test]
async fn a_batched_swap_reads_only_the_rows_of_its_jobs() {
    let (scratch, db, pool) = super::super::scratch("stepwise_t_batch_plan").await;
    sqlx::query(
        "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
         required_capabilities, max_attempts, next_attempt_at, created_at, updated_at, \
         finished_at) SELECT gen_random_uuid(), 'task', 'succeeded', 0, '{}', 'o/r', \
         '[]', 3, now(), now(), now(), now() FROM generate_series(1, 20000)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let queue = Queue::open(db, QueueConfig::new(std::env::temp_dir()))
        .await
        .unwrap();
    let task = task();
    for _ in 0..32 {
        queue.create_job(&task, Some("alice")).await.unwrap();
    }
    let request = request();
    let claimed = queue.claim_many(&request, 32).await.unwrap();
    for table in ["jobs", "job_queue"] {
        sqlx::query(&format!("ANALYZE {table}"))
            .execute(&pool)
            .await
            .unwrap();
    }
    let swaps: Vec<Swap> = claimed.iter().map(completed).collect();
    let swaps: Vec<&Swap> = swaps.iter().collect();
    let order = id_order(&swaps);
    let explain = format!("EXPLAIN {SWAP_JOBS_POSTGRES}");
    let mut conn = pool.acquire().await.unwrap();
    for setting in [
        "SET plan_cache_mode = force_generic_plan",
        "SET enable_sort = off",
    ] {
        sqlx::query(setting).execute(&mut *conn).await.unwrap();
    }
    let plan: Vec<String> = bind_swaps(&explain, &swaps, &order)
        .unwrap()
        .fetch_all(&mut *conn)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>(0))
        .collect();
    let plan = plan.join("\n");
    assert!(!plan.contains("Seq Scan on jobs"), "{plan}");
    let lines: Vec<&str> = plan.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        if line.contains("Scan using jobs_pkey") {
            let next = lines.get(n + 1).copied().unwrap_or_default();
            assert!(next.contains("Index Cond"), "a walk of every job: {plan}");
        }
    }
    // The live rows are locked along their key, for the ids: in id order, the order of
    // every write that locks several.
    let held = lines
        .iter()
        .position(|line| line.contains("CTE held"))
        .unwrap_or_else(|| panic!("{plan}"));
    let scan = lines[held + 1..].join("\n");
    assert!(
        scan.contains("Index Scan using job_queue_pkey")
            && scan.find("Index Scan using job_queue_pkey") < scan.find("CTE gone")
            && scan.contains("Index Cond: (id = ANY"),
        "{plan}"
    );
    drop(conn);
    scratch.drop_database().await.unwrap();
}

/// Issue 39: a batch of successes ends jobs created together, whose rows share pages. Each
/// success's new version must find room on its page to be written in place (HOT): at a
/// fillfactor of 70 (0013) about half of a batch's did not, and each of those wrote a new
/// entry in every index of `jobs` and its whole row to the WAL; 0028 keeps half of each
/// page free.
#[tokio::test]
async fn a_batch_of_successes_over_jobs_created_together_stays_on_their_pages() {
    let (scratch, queue, pool) = scratch_queue("stepwise_t_batch_hot").await;
    let task = json!({ "type": "task", "payload": { "repository": "octo/repo",
        "task": { "instructions": "Fix the failing test in the parser.",
                  "steps": [{ "instructions": "Make the parser's tests pass." }],
                  "publish": { "mode": "none" } } } });
    for _ in 0..96 {
        queue.create_job(&task, Some("alice")).await.unwrap();
    }
    let request = request();
    let (mut updated, mut hot) = (0_i64, 0_i64);
    for _ in 0..3 {
        let claimed = queue.claim_many(&request, 32).await.unwrap();
        assert_eq!(claimed.len(), 32);
        let (u, h) = completed_in_one_transaction(&pool, &claimed).await;
        (updated, hot) = (updated + u, hot + h);
    }
    assert_eq!(
        (updated, hot),
        (96, 96),
        "the batches' updates, and in place"
    );
    scratch.drop_database().await.unwrap();
}

/// Issue 39: a batch of claims leases live rows made together, which share pages, before any
/// of them ends. A claim changes what the live table's partial indexes name, so it is never
/// HOT; written on its old row's page its record holds only the changed middle of the row,
/// written elsewhere the whole row. At 0025's fillfactor of 70, 19 of these 96 found no
/// room on their page; 0029 keeps room for all of them.
#[tokio::test]
async fn a_batch_of_claims_over_jobs_created_together_stays_on_their_pages() {
    let (scratch, queue, pool) = scratch_queue("stepwise_t_claim_pages").await;
    for _ in 0..96 {
        queue.create_job(&task(), Some("alice")).await.unwrap();
    }
    let pages = || {
        sqlx::query_scalar::<_, String>(
            "SELECT split_part(ctid::text, ',', 1) FROM job_queue ORDER BY id",
        )
        .fetch_all(&pool)
    };
    let before = pages().await.unwrap();
    let used: std::collections::BTreeSet<&String> = before.iter().collect();
    assert!(used.len() > 1, "the rows span pages: {used:?}");
    for _ in 0..3 {
        let claimed = queue.claim_many(&request(), 32).await.unwrap();
        assert_eq!(claimed.len(), 32);
    }
    let after = pages().await.unwrap();
    let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    assert_eq!((after.len(), moved), (96, 0), "leased rows left their page");
    scratch.drop_database().await.unwrap();
}

/// Issue 39: every claim adds an entry to the index of running jobs (it is never HOT).
/// Migration 0030 keys that index by the id alone, so its entry is narrower than one of
/// the claim order's (priority, creation, id), whatever the repository's name. These 3,000
/// claims of jobs in a repository with a long name made it 14 pages against the claim
/// order's 20; keyed by (id, repository), 47.
#[tokio::test]
async fn a_claims_entry_among_the_running_is_its_id_alone_whatever_the_repository() {
    let (scratch, queue, pool) = scratch_queue("stepwise_t_running_entry").await;
    let task = json!({ "type": "task", "payload": {
        "repository": "https://github.com/an-organisation-with-a-long-name/a-repository-named-at-length",
        "task": { "instructions": "x", "publish": { "mode": "none" } } } });
    const JOBS: usize = 3000;
    for _ in 0..JOBS {
        queue.create_job(&task, Some("alice")).await.unwrap();
    }
    let mut claimed = 0;
    while claimed < JOBS {
        let batch = queue.claim_many(&request(), 32).await.unwrap();
        assert!(!batch.is_empty(), "every queued job is claimable");
        claimed += batch.len();
    }
    let pages = |index: &'static str| {
        sqlx::query_scalar::<_, i64>("SELECT pg_relation_size($1::regclass) / 8192")
            .bind(index)
            .fetch_one(&pool)
    };
    let running = pages("job_queue_running").await.unwrap();
    let order = pages("job_queue_claim_order").await.unwrap();
    // Both were written in the jobs' order, one entry a job: the claim order's when each
    // was queued, the running jobs' when each was claimed.
    assert!(
        running < order,
        "the running jobs' index takes {running} pages, the claim order's {order}"
    );
    scratch.drop_database().await.unwrap();
}

/// The two ways one live job ends by itself: a success kept in its row appends no event
/// row (its statement has no insert of events) and answers the id its update drew; a
/// queued job cancelled appends its event and answers that row's id.
#[tokio::test]
async fn a_success_kept_in_its_row_appends_nothing_and_a_cancel_appends_its_event() {
    let (scratch, queue, pool) = scratch_queue("stepwise_t_ends").await;
    let task = task();
    let first = queue.create_job(&task, Some("alice")).await.unwrap();
    let second = queue.create_job(&task, Some("alice")).await.unwrap();
    let running = queue.claim(&request()).await.unwrap().unwrap();
    assert_eq!(running.id, first.id);
    let queued = queue.get_job(&second.id).await.unwrap();
    let now = Utc::now();
    let mut cancelled = queued.clone();
    let Ok(Outcome::Changed { events, .. }) =
        machine::request_cancel(&mut cancelled, Some("alice"), None, now)
    else {
        panic!("a queued job is cancelled")
    };
    let cancel = Swap {
        old: Arc::new(queued),
        new: cancelled,
        events,
        now,
    };
    let success = completed(&running);
    assert!(success.keeps_its_success() && !cancel.keeps_its_success());
    let rows_of = |job: &Job| {
        sqlx::query_scalar::<_, i64>("SELECT id FROM job_events WHERE job_id = $1 ORDER BY id")
            .bind(job.id.uuid())
            .fetch_all(&pool)
    };
    let before = (
        rows_of(&first).await.unwrap(),
        rows_of(&second).await.unwrap(),
    );
    let mut conn = pool.acquire().await.unwrap();
    // One swap per call: each goes by the statement of its own shape.
    let [Some(drew)] = &write_jobs_if_unchanged(&mut conn, &[&success], Statements::Alone)
        .await
        .unwrap()[..]
    else {
        panic!("the success is written")
    };
    let [Some(appended)] = &write_jobs_if_unchanged(&mut conn, &[&cancel], Statements::Alone)
        .await
        .unwrap()[..]
    else {
        panic!("the cancel is written")
    };
    drop(conn);
    let kept: Option<i64> = sqlx::query_scalar("SELECT completed_event_id FROM jobs WHERE id = $1")
        .bind(first.id.uuid())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        drew,
        &vec![kept.unwrap()],
        "the success's id, kept in the row"
    );
    assert_eq!(
        rows_of(&first).await.unwrap(),
        before.0,
        "no event row for the success"
    );
    let after = rows_of(&second).await.unwrap();
    assert_eq!(
        &after[before.1.len()..],
        &appended[..],
        "the cancel's event row"
    );
    assert_eq!(
        queue.get_job(&second.id).await.unwrap().status,
        contract::JobState::Cancelled
    );
    scratch.drop_database().await.unwrap();
}
