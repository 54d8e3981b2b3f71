//! Jobs that wait for others, end to end on SQLite and on PostgreSQL: submitted over REST,
//! run by the real worker with the scripted agent, released by the resolver as `serve`
//! runs it. A job waits queued while what it waits for runs, then runs; a job waiting for
//! one that fails is cancelled, naming it, and never runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use contract::{Job, JobState};
use queue::Role;
use serde_json::json;
use stepwise::testing::server::start_on;
use stepwise::testing::site::{Backend, TestDb};
use tokio_util::sync::CancellationToken;
use worker::client::QueueClient;
use worker::runner::{Shutdown, WorkerConfig, run};
use worker::testing::{remote, stage_config};

async fn submit(user: &QueueClient, remote: &str, step: &str, depends_on: &[&Job]) -> Job {
    let ids: Vec<String> = depends_on.iter().map(|j| j.id.to_string()).collect();
    let request = json!({ "dependsOn": ids, "payload": { "repository": remote, "task": {
        "instructions": "Greet", "runtime": { "mode": "claude" }, "publish": { "mode": "none" },
        "steps": [{ "instructions": step }] } } });
    user.create_job(&request).await.unwrap()
}

async fn until(user: &QueueClient, job: &Job, done: impl Fn(&Job) -> bool) -> Job {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let current = user.get_job(&job.id).await.unwrap();
        if done(&current) {
            return current;
        }
        assert!(Instant::now() < deadline, "never: {current:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn waits_then_runs_or_is_cancelled(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = start_on(db.url.as_deref(), Arc::new(tokio::sync::Notify::new())).await;
    let stop = CancellationToken::new();
    queue::Resolver::new(server.queue().clone(), queue::ResolverConfig::default())
        .start(stop.clone());
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let mut config = WorkerConfig::new(stage_config(tmp.path()));
    config.claim_wait = Duration::from_secs(1);
    let shutdown = Shutdown::default();
    tokio::spawn(run(server.worker("w").await, config, shutdown.clone()));
    let user = server.user(Role::Operator).await;

    let first = submit(&user, &remote, "@fake sleep 1\n@fake say first", &[]).await;
    let second = submit(&user, &remote, "@fake say second", &[&first]).await;
    assert_eq!(
        (second.status, second.waiting_for.clone()),
        (JobState::Queued, vec![first.id])
    );
    let first = until(&user, &first, |j| j.status == JobState::Succeeded).await;
    let second = until(&user, &second, |j| j.status == JobState::Succeeded).await;
    assert!(
        second.started_at.unwrap() >= first.finished_at.unwrap(),
        "it ran after"
    );
    assert!(second.waiting_for.is_empty());

    let failing = submit(&user, &remote, "@fake fail 3", &[]).await;
    let blocked = submit(&user, &remote, "@fake say never", &[&failing]).await;
    until(&user, &failing, |j| j.status.is_terminal()).await;
    let blocked = until(&user, &blocked, |j| j.status == JobState::Cancelled).await;
    assert!(blocked.started_at.is_none(), "never ran");
    let reason = blocked.cancel_reason.unwrap_or_default();
    assert!(reason.contains(&failing.id.to_string()), "{reason}");
    stop.cancel();
    shutdown.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waits_then_runs_or_is_cancelled_with_its_dependency_on_sqlite() {
    waits_then_runs_or_is_cancelled(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waits_then_runs_or_is_cancelled_with_its_dependency_on_postgres() {
    waits_then_runs_or_is_cancelled(Backend::Postgres).await;
}
