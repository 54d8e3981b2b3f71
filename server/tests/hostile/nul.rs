//! An agent that prints a NUL. PostgreSQL cannot store U+0000 in text and SQLite can, so
//! the queue replaces each NUL a worker reports with U+FFFD (`contract::text`): the job
//! keeps its log line and its failure message on both backends, and a NUL is never the
//! reason for a 500, a retry or a lost report.

use std::time::{Duration, Instant};

use contract::job::{events, task};
use contract::text::NUL_REPLACEMENT;
use contract::{Job, JobState};
use serde_json::{Value, json};
use worker::runner::WorkerConfig;

use super::live::LiveSite;
use stepwise::testing::site::Backend;

#[tokio::test]
async fn a_nul_in_agent_output_and_failure_fails_once_with_it_replaced_on_sqlite() {
    a_nul_is_replaced_and_fails_once(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_nul_in_agent_output_and_failure_fails_once_with_it_replaced_on_postgres() {
    a_nul_is_replaced_and_fails_once(Backend::Postgres).await;
}

async fn a_nul_is_replaced_and_fails_once(backend: Backend) {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let remote = worker::testing::remote(tmp.path());
    let mut site = LiveSite::start(backend).await;
    let mut config = WorkerConfig::new(worker::testing::stage_config(tmp.path()));
    config.claim_wait = Duration::from_secs(2);
    site.start_worker("hostile-nul", config).await;

    // The failure's text goes into the agent's JSON result as written, so `\u0000` there
    // is a real NUL once parsed; the task itself holds none (it would be refused).
    let job = site
        .submit(&json!({
            "maxAttempts": 3,
            "payload": {
                "repository": remote,
                "task": {
                    "instructions": "Print a NUL",
                    "runtime": { "mode": "claude" },
                    "publish": { "mode": "none" },
                    "steps": [{ "instructions":
                        "@fake nul logline\n@fake fail-with 1 broken\\u0000result" }],
                },
            },
        }))
        .await;
    let done = first_end_or_retry(&site, &job).await;
    let fffd = NUL_REPLACEMENT;
    assert_eq!(done.status, JobState::Failed, "{backend:?}: {done:?}");
    assert_eq!(done.attempt, 1, "{backend:?}: {done:?}");
    assert_eq!(
        done.error_message.as_deref(),
        Some(format!("{}: broken{fffd}result", task::STAGE_EXECUTE).as_str()),
        "{backend:?}"
    );

    let pages = site.events(&job.id.to_string()).await;
    let events: Vec<Value> = pages
        .iter()
        .flat_map(|page| {
            let page: Value = serde_json::from_str(page).unwrap();
            page["items"].as_array().unwrap().clone()
        })
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("?"))
        .collect();
    let message = |kind: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(
        message(task::STEP_LOG)
            .iter()
            .any(|m| m.lines().any(|l| l == format!("logline{fffd}logline"))),
        "{backend:?}: {:#?}",
        message(task::STEP_LOG)
    );
    assert_eq!(
        message(task::STEP_FAILED),
        [format!("broken{fffd}result")],
        "{backend:?}: {kinds:?}"
    );
    assert!(
        !kinds.contains(&events::JOB_RETRY_SCHEDULED),
        "{backend:?}: {kinds:?}"
    );
    assert!(
        pages.iter().all(|page| !page.contains("\\u0000")),
        "{backend:?}: a NUL was served"
    );

    // The pages show it all without a 500; the step's log is stored as the agent wrote it.
    site.page(&format!("/tasks/queue/{}", job.id)).await;
    let list = site
        .api(&format!("/api/queue/jobs/{}/artifacts", job.id))
        .await;
    let artifacts: Value = serde_json::from_str(&list).unwrap();
    let log = artifacts["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == task::step_log(0))
        .unwrap_or_else(|| panic!("{backend:?}: no step log in {list}"));
    let id = log["id"].as_str().unwrap();
    let body = site
        .api(&format!(
            "/api/queue/jobs/{}/artifacts/{id}/download",
            job.id
        ))
        .await;
    assert!(body.contains("logline\0logline"), "{backend:?}: {body:?}");
    site.page(&format!("/tasks/queue/{}/artifacts/{id}", job.id))
        .await;
    eprintln!("{backend:?}: in {:?}", started.elapsed());
}

/// The job when it ends, or as soon as it went round again: a retry must fail the test
/// at once, not after the retries' backoff.
async fn first_end_or_retry(site: &LiveSite, job: &Job) -> Job {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let current = site.user.get_job(&job.id).await.unwrap();
        if current.status.is_terminal() || current.attempt > 1 || current.error_message.is_some() {
            return current;
        }
        assert!(
            Instant::now() < deadline,
            "{:?}: the job never ended (a report the database refused?): {current:?}",
            site.backend
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
