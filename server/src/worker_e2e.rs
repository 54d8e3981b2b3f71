//! The worker's claim loop against the real API over a real socket: jobs submitted by a
//! user run through the scripted agent and end succeeded, or cancelled on request.

use std::time::{Duration, Instant};

use contract::job::task;
use contract::{Job, JobState};
use queue::Role;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use worker::client::QueueClient;
use worker::runner::{WorkerConfig, run};
use worker::testing::{remote, stage_config};

use crate::jobs_cli::test_server::{TestServer, start};

struct Setup {
    server: TestServer,
    user: QueueClient,
    remote: String,
    stop: CancellationToken,
    _tmp: tempfile::TempDir,
}

async fn setup() -> Setup {
    let server = start().await;
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let stages = stage_config(tmp.path());
    let mut config = WorkerConfig::new(stages);
    config.claim_wait = Duration::from_secs(2);
    let stop = CancellationToken::new();
    tokio::spawn(run(server.worker("e2e-worker").await, config, stop.clone()));
    let user = server.user(Role::Operator).await;
    Setup {
        server,
        user,
        remote,
        stop,
        _tmp: tmp,
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Setup {
    async fn submit(&self, steps: serde_json::Value) -> Job {
        let request = json!({ "payload": {
            "repository": self.remote,
            "task": {
                "instructions": "Greet",
                "runtime": { "mode": "claude" },
                "publish": { "mode": "none" },
                "steps": steps,
            },
        }});
        self.user.create_job(&request).await.unwrap()
    }

    async fn until(
        &self,
        job: &Job,
        what: &str,
        done: impl Fn(&Job, &[String]) -> bool,
    ) -> (Job, Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let current = self.user.get_job(&job.id).await.unwrap();
            let events = self
                .user
                .list_events(&job.id, None, Some(500))
                .await
                .unwrap();
            let kinds: Vec<String> = events
                .iter()
                .map(|e| format!("{} {}", e.kind, e.message))
                .collect();
            if done(&current, &kinds) {
                return (current, kinds);
            }
            assert!(
                Instant::now() < deadline,
                "{what} never happened: {current:?} {kinds:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn a_submitted_task_runs_on_the_worker_and_succeeds() {
    let s = setup().await;
    let job = s
        .submit(json!([
            { "instructions": "@fake write hello.txt hello" },
            { "instructions": "@fake say all good" },
        ]))
        .await;
    let (done, kinds) = s
        .until(&job, "success", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(done.result_summary.as_deref(), Some("publish skipped"));
    for kind in [
        task::STEPS_PLAN,
        task::STEP_STARTED,
        task::STEP_FINISHED,
        task::STAGE_FINISHED,
    ] {
        assert!(
            kinds.iter().any(|k| k.starts_with(kind)),
            "no {kind}: {kinds:#?}"
        );
    }
    let artifacts: Vec<String> = s
        .user
        .list_artifacts(&job.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    for name in [
        "task_context.json",
        "logs/steps/step-0000.log",
        "patches/steps/step-0000.patch",
        "publish_result.json",
    ] {
        assert!(
            artifacts.contains(&name.to_string()),
            "no {name}: {artifacts:?}"
        );
    }
    let _ = s.server.url();
}

#[tokio::test]
async fn a_cancel_stops_the_running_step_and_the_job_ends_cancelled() {
    let s = setup().await;
    let job = s
        .submit(json!([
            { "instructions": "@fake ignore-term\n@fake say started\n@fake sleep 60" },
            { "instructions": "@fake write never.txt x" },
        ]))
        .await;
    s.until(&job, "the step starting", |_, kinds| {
        kinds
            .iter()
            .any(|k| k.starts_with(task::STEP_LOG) && k.contains("started"))
    })
    .await;
    let asked = Instant::now();
    s.user
        .cancel_job(&job.id, Some("changed my mind"))
        .await
        .unwrap();
    let (done, kinds) = s
        .until(&job, "the cancel", |j, _| j.status.is_terminal())
        .await;
    let took = asked.elapsed();
    assert_eq!(done.status, JobState::Cancelled, "{done:?} {kinds:#?}");
    assert!(
        kinds.iter().any(|k| k.starts_with(task::STEP_CANCELLED)),
        "{kinds:#?}"
    );
    assert!(
        !kinds.iter().any(|k| k.contains("step 2/2")),
        "the second step ran: {kinds:#?}"
    );
    // Reported, not asserted tightly (the stop includes the 300 ms grace before SIGKILL).
    // The bound still tells the event stream from the heartbeat: with a 60 s lease the
    // first heartbeat, the only other way the worker hears of the cancel, comes at 20 s.
    eprintln!("cancel request → job cancelled: {took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
}
