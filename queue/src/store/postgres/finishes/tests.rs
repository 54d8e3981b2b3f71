//! A finish: its swap, then its claim, in one statement, and what a stale one claims.

use super::*;
use crate::lease::Fence;
use crate::machine::{self, Outcome};
use crate::store::ClaimSql;
use crate::{Queue, QueueConfig, ScratchPostgres};
use contract::{Job, JobState};
use serde_json::json;
use std::sync::Arc;

const CAPS: [&str; 3] = ["codex", "git", "docker"];

/// A queue on a scratch database, with `n` jobs queued (the last ones needing
/// `docker` from `docker_from` on) and the first two claimed by workers `a` and `b`. The
/// live table was vacuumed while it was empty, as the queue's own vacuum leaves it between
/// bursts: its statistics then say it holds nothing.
async fn two_held(n: usize, docker_from: usize) -> (ScratchPostgres, Queue, PgPool, [Job; 2]) {
    let (scratch, db, pool) = super::super::scratch("stepwise_t_finish").await;
    sqlx::query("VACUUM (ANALYZE) job_queue")
        .execute(&pool)
        .await
        .unwrap();
    let dir = std::env::temp_dir();
    let queue = Queue::open(db, QueueConfig::new(dir)).await.unwrap();
    for i in 0..n {
        let caps = if i >= docker_from {
            json!(["docker"])
        } else {
            json!([])
        };
        let task = json!({ "type": "task", "payload": {
            "repository": "octo/repo", "requiredCapabilities": caps,
            "task": { "instructions": "x", "publish": { "mode": "none" } } } });
        queue.create_job(&task, Some("alice")).await.unwrap();
    }
    let mut held = Vec::new();
    for worker in ["a", "b"] {
        let request = crate::ClaimRequest {
            worker_id: worker.into(),
            capabilities: vec!["codex".into(), "git".into()],
            allowed_types: None,
            allowed_repositories: None,
            lease: std::time::Duration::from_secs(60),
            max_running_per_repository: None,
        };
        held.push(queue.claim(&request).await.unwrap().unwrap());
    }
    (scratch, queue, pool, held.try_into().unwrap())
}

/// The states of `jobs` as the queue reads them now.
async fn states(queue: &Queue, jobs: [&Job; 2]) -> Vec<JobState> {
    let mut states = Vec::new();
    for job in jobs {
        states.push(queue.get_job(&job.id).await.unwrap().status);
    }
    states
}

/// How many notices the webhook outbox holds.
async fn told(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM webhook_outbox")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A finish of `job` by its worker, claiming up to `limit` jobs with `caps`.
fn finish(job: &Job, caps: &[&str], limit: u32) -> Finish {
    let now = Utc::now();
    let mut new = job.clone();
    let fence = Fence::of(job).unwrap();
    let Ok(Outcome::Changed { events, .. }) = machine::complete(&mut new, &fence, now, None) else {
        panic!("a running job completes")
    };
    let capabilities: Vec<String> = caps.iter().map(|c| c.to_string()).collect();
    let worker = job.claimed_by.clone().unwrap();
    let claim = Claim::of(&ClaimSql {
        worker_id: &worker,
        capabilities: &capabilities,
        allowed_types: None,
        allowed_repositories: None,
        now,
        lease_until: now + chrono::Duration::seconds(60),
        limit,
        repository_limit: None,
    });
    Finish {
        swap: Swap {
            old: Arc::new(job.clone()),
            new,
            events,
            now,
        },
        claim,
    }
}

/// A burst of jobs after the live table was vacuumed empty ([`two_held`]): a finish's
/// claim, planned now, still reads only the live rows it picked, never every live row.
#[tokio::test]
async fn a_finish_claims_by_the_ids_it_picked_after_the_live_table_was_vacuumed_empty() {
    let (scratch, queue, pool, [held, _]) = two_held(2000, 2000).await;
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SET plan_cache_mode = force_generic_plan")
        .execute(&mut *conn)
        .await
        .unwrap();
    let one = finish(&held, &CAPS[..2], 2);
    assert!(one.swap.keeps_its_success());
    let explain = format!(
        "EXPLAIN (ANALYZE, COSTS OFF) {}",
        *FINISH_SUCCEEDS_ONE_POSTGRES
    );
    let (query, _, _) = bound(&explain, &[&one.swap], &[&one]).unwrap();
    let plan: Vec<String> = query
        .fetch_all(&mut *conn)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let plan = plan.join("\n");
    // Each read of the live table takes a row or two: the finished job's, the two
    // picked. A walk of the table would read all 2,000.
    let read = |line: &str| -> u64 {
        let rows = line.split("rows=").nth(1).unwrap_or("0");
        rows.split(' ').next().unwrap().parse().unwrap()
    };
    let reads: Vec<u64> = plan
        .lines()
        .filter(|l| l.contains(" on job_queue"))
        .map(read)
        .collect();
    assert!(reads.len() >= 3 && reads.iter().all(|&n| n <= 2), "{plan}");
    assert!(plan.contains("Index Cond: (id = ANY ($"), "{plan}");
    drop(conn);
    drop(queue);
    scratch.drop_database().await.unwrap();
}

#[tokio::test]
async fn finishes_alike_share_one_statement_and_a_stale_one_claims_nothing() {
    let (scratch, queue, pool, [a, b]) = two_held(5, 5).await;
    let mut stale = finish(&b, &CAPS[..2], 1);
    Arc::make_mut(&mut stale.swap.old).updated_at += chrono::Duration::seconds(1);
    let first = finish(&a, &CAPS[..2], 2);
    let answers = finish_on(&mut Lent::of(&pool), &[&first, &stale])
        .await
        .unwrap();
    let (written, leased) = &answers[0];
    assert_eq!(
        written.as_ref().map(Vec::len),
        Some(1),
        "the success's event id"
    );
    assert_eq!(leased.len(), 2);
    assert!(
        leased
            .iter()
            .all(|(job, _)| job.claimed_by.as_deref() == Some("a"))
    );
    assert_eq!(answers[1], (None, Vec::new()));
    assert_eq!(
        states(&queue, [&a, &b]).await,
        [JobState::Succeeded, JobState::Running]
    );
    // Not `pool.close()`: it waits for every connection to come back, and the queue's
    // own tasks may hold one to the end. The forced drop ends them.
    scratch.drop_database().await.unwrap();
}

#[tokio::test]
async fn a_finish_alone_claims_after_its_success_and_a_stale_one_claims_nothing() {
    let (scratch, queue, pool, [a, b]) = two_held(5, 5).await;
    queue.listen_for_notifications("r1").await.unwrap();
    let answers = finish_on(&mut Lent::of(&pool), &[&finish(&a, &CAPS[..2], 2)])
        .await
        .unwrap();
    let [(Some(written), leased)] = &answers[..] else {
        panic!("one finish written: {answers:?}")
    };
    assert_eq!(written.len(), 1, "the success's event id");
    assert_eq!(leased.len(), 2);
    assert!(
        leased
            .iter()
            .all(|(job, event)| job.claimed_by.as_deref() == Some("a") && event.id > written[0]),
        "the claims' events come after the success's: {answers:?}"
    );
    assert!(
        leased[0].0.created_at <= leased[1].0.created_at,
        "claim order"
    );
    let mut stale = finish(&b, &CAPS[..2], 1);
    Arc::make_mut(&mut stale.swap.old).updated_at += chrono::Duration::seconds(1);
    let answers = finish_on(&mut Lent::of(&pool), &[&stale]).await.unwrap();
    assert_eq!(answers, vec![(None, Vec::new())]);
    assert_eq!(
        states(&queue, [&a, &b]).await,
        [JobState::Succeeded, JobState::Running]
    );
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM job_queue WHERE status = 'queued'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(queued, 1, "the stale finish leased nothing");
    assert_eq!(
        told(&pool).await,
        1,
        "the success is told, the stale one is not"
    );
    // Not `pool.close()`: it waits for every connection to come back, and the queue's
    // own tasks may hold one to the end. The forced drop ends them.
    scratch.drop_database().await.unwrap();
}

#[tokio::test]
async fn finishes_that_ask_differently_each_claim_what_they_may() {
    let (scratch, queue, pool, [a, b]) = two_held(4, 3).await;
    queue.listen_for_notifications("r1").await.unwrap();
    let plain = finish(&a, &CAPS[..2], 5);
    let docker = finish(&b, &CAPS, 5);
    let answers = finish_on(&mut Lent::of(&pool), &[&plain, &docker])
        .await
        .unwrap();
    let ids = |n: usize| -> Vec<_> { answers[n].1.iter().map(|(job, _)| job.id).collect() };
    assert_eq!(
        ids(0).len(),
        1,
        "one plain job is left for `a`: {answers:?}"
    );
    assert_eq!(
        ids(1).len(),
        1,
        "only `b` may take the docker job: {answers:?}"
    );
    let docker_job = queue.get_job(&ids(1)[0]).await.unwrap();
    assert_eq!(
        docker_job.required_capabilities.last().map(String::as_str),
        Some("docker")
    );
    assert!(answers.iter().all(|(written, _)| written.is_some()));
    assert_eq!(told(&pool).await, 2, "each success of the batch is told");
    // Not `pool.close()`: it waits for every connection to come back, and the queue's
    // own tasks may hold one to the end. The forced drop ends them.
    scratch.drop_database().await.unwrap();
}
