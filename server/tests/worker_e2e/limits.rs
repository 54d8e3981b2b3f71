//! A worker's own limits, through the real API: at most N jobs of a runtime at once on
//! it, and (sent with its claims) at most N running jobs of a repository on any worker.

use std::time::Duration;

use contract::JobState;
use serde_json::json;

use super::setup_with;

/// A step that runs until `gate` exists.
fn held(gate: &std::path::Path) -> serde_json::Value {
    json!([{ "instructions": format!("@fake say held\n@fake wait-for {}", gate.display()) }])
}

#[tokio::test]
async fn a_runtime_at_its_limit_on_a_worker_waits_while_the_worker_has_room() {
    // The count the server's metrics read for its embedded worker.
    let running = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = setup_with({
        let running = running.clone();
        |config| {
            config.concurrency = 2;
            config.max_running_per_runtime = [("claude".to_string(), 1)].into();
            config.running_jobs = running;
            // A second runtime on offer, as most workers have: the worker must still see
            // that its claude job ended while it had room, and offer claude again.
            config.stages.capabilities.push("codex".into());
        }
    })
    .await;
    let gate = s.tmp.path().join("gate");
    let first = s.submit(held(&gate)).await;
    s.until(&first, "the first job running", |j, _| {
        j.status == JobState::Running
    })
    .await;
    let second = s
        .submit(json!([{ "instructions": "@fake say second" }]))
        .await;
    // Two slots, but claude has its one job: the second stays queued.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let waiting = s.user.get_job(&second.id).await.unwrap();
    assert_eq!(waiting.status, JobState::Queued, "{waiting:?}");
    assert_eq!(running.load(std::sync::atomic::Ordering::Relaxed), 1);
    std::fs::write(&gate, "").unwrap();
    let (done, _) = s
        .until(&second, "the second job done", |j, _| {
            j.status == JobState::Succeeded
        })
        .await;
    let first = s.user.get_job(&first.id).await.unwrap();
    assert_eq!(first.status, JobState::Succeeded);
    assert!(
        done.started_at >= first.finished_at,
        "they ran one at a time: {first:?} {done:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while running.load(std::sync::atomic::Ordering::Relaxed) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the running count never fell to 0"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_worker_s_repository_limit_holds_the_repository_and_runs_another() {
    let s = setup_with(|config| {
        config.concurrency = 3;
        config.max_running_per_repository = Some(1);
    })
    .await;
    let gate = s.tmp.path().join("gate");
    let first = s.submit(held(&gate)).await;
    s.until(&first, "the first job running", |j, _| {
        j.status == JobState::Running
    })
    .await;
    let same = s
        .submit(json!([{ "instructions": "@fake say same" }]))
        .await;
    let other_remote = worker::testing::remote(&s.tmp.path().join("other"));
    let other = s
        .user
        .create_job(&json!({ "payload": {
            "repository": other_remote,
            "task": {
                "instructions": "Elsewhere",
                "runtime": { "mode": "claude" },
                "publish": { "mode": "none" },
                "steps": [{ "instructions": "@fake say elsewhere" }],
            },
        }}))
        .await
        .unwrap();
    // The other repository's job runs beside the first; the same repository's waits.
    s.until(&other, "the other repository's job done", |j, _| {
        j.status == JobState::Succeeded
    })
    .await;
    let waiting = s.user.get_job(&same.id).await.unwrap();
    assert_eq!(waiting.status, JobState::Queued, "{waiting:?}");
    std::fs::write(&gate, "").unwrap();
    s.until(&same, "the held repository's next job done", |j, _| {
        j.status == JobState::Succeeded
    })
    .await;
}
