//! The lock-free swaps on a real PostgreSQL: what each shape writes, and what it leaves.

use super::*;
use crate::lease::Fence;
use crate::machine::{self, Outcome};
use crate::{ClaimRequest, Queue, QueueConfig};
use serde_json::json;
use sqlx::PgPool;

/// What worker `w` claims with in these tests.
fn request() -> ClaimRequest {
    ClaimRequest {
        worker_id: "w".into(),
        capabilities: vec!["codex".into(), "git".into()],
        allowed_types: None,
        allowed_repositories: None,
        lease: std::time::Duration::from_secs(60),
        max_running_per_repository: None,
    }
}

/// The version of the job's own row: unchanged while nothing wrote it.
async fn version(pool: &PgPool, job: &Job) -> String {
    sqlx::query_scalar("SELECT xmin::text FROM jobs WHERE id = $1")
        .bind(job.id.uuid())
        .fetch_one(pool)
        .await
        .unwrap()
}

fn completed(job: &Job) -> Swap {
    let now = Utc::now();
    let mut new = job.clone();
    let fence = Fence::of(job).unwrap();
    let Ok(Outcome::Changed { events, .. }) = machine::complete(&mut new, &fence, now, None) else {
        panic!("a running job completes")
    };
    Swap {
        old: job.clone(),
        new,
        events,
        now,
    }
}

/// Issue 39, step 2: a claim leaves the job's own row as it was (it writes the live
/// row alone), and a success is one update of that row that no index sees, which
/// PostgreSQL writes in place (HOT), alone or in a batch.
#[tokio::test]
async fn a_claim_leaves_the_job_s_row_and_a_success_updates_it_once_in_place() {
    let (scratch, db, pool) = super::super::scratch("stepwise_t_hot").await;
    let queue = Queue::open(db, QueueConfig::new(std::env::temp_dir()))
        .await
        .unwrap();
    let task = json!({ "type": "task", "payload": { "repository": "octo/repo",
        "task": { "instructions": "x", "publish": { "mode": "none" } } } });
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
        let swaps: Vec<Swap> = swaps.iter().map(completed).collect();
        let swaps: Vec<&Swap> = swaps.iter().collect();
        let mut tx = pool.begin().await.unwrap();
        let written = write_jobs_if_unchanged(&mut tx, &swaps).await.unwrap();
        assert!(written.iter().all(Option::is_some), "{written:?}");
        let (updated, hot): (i64, i64) = sqlx::query_as(
            "SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass), \
             pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)",
        )
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        assert_eq!(
            (updated, hot),
            (n, n),
            "updates of the jobs' rows, and in place"
        );
        tx.commit().await.unwrap();
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
/// of its locks, a second per batch of 32 at 30,000 jobs.
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
    let task = json!({ "type": "task", "payload": { "repository": "octo/repo",
        "task": { "instructions": "x", "publish": { "mode": "none" } } } });
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
    drop(conn);
    scratch.drop_database().await.unwrap();
}
