//! Golden timelines: what a job's history reads as, whole, for each way a job goes
//! (succeeds, fails, retries, its lease expires, cancelled queued or running, paused,
//! approved, looped and followed up, claimed and completed in batches). Issue 39 changes
//! where the queue keeps a job and its claim and success events; these cases hold the
//! timelines a reader sees to what they were before, on both backends, through every way
//! a timeline is read (from either end, by cursor one event at a time, without log lines).
//!
//! The files are `golden/<case>.json`. `STEPWISE_BLESS=1` writes them instead of comparing;
//! only do that for a change meant to alter what a reader sees, and say so.

use std::path::PathBuf;
use std::time::Duration;

use contract::events::{CheckpointSaved, TaskEvent};
use contract::job::task;
use contract::{Job, JobEvent, JobId, NewEvent};
use queue::{Completion, Rescuer, RescuerConfig};
use serde_json::{Map, Value, json};

use crate::harness::*;

/// A task of three steps with a completion loop, so that a follow-up, a retry from a step
/// and an approval all have somewhere to go.
pub(crate) async fn task_job(h: &Harness, approval: bool) -> Job {
    let mut task = json!({
        "instructions": "Tidy up.",
        "steps": [
            { "instructions": "one" },
            { "instructions": "two" },
            { "instructions": "three" }
        ],
        "completion": { "criteria": "tidy" },
        "publish": { "mode": "none" }
    });
    if approval {
        task["publish"] = json!({ "mode": "none", "approval": "required" });
    }
    let spec = json!({
        "type": "task",
        "maxAttempts": 3,
        "payload": { "repository": "octo/repo", "task": task }
    });
    h.queue.create_job(&spec, Some("alice")).await.unwrap()
}

fn event(kind: &str, message: &str, payload: Value) -> NewEvent {
    NewEvent {
        kind: kind.into(),
        level: contract::EventLevel::Info,
        message: message.into(),
        payload: payload.as_object().cloned().unwrap_or_default(),
    }
}

/// What a worker reports while it runs the step at `index`: the stage and the step
/// starting, a log line, an iteration of the loop, the step's end and its checkpoint.
pub(crate) async fn run_step(h: &Harness, job: &Job, index: usize) {
    h.advance(Duration::from_millis(250));
    let id = format!("step-{}", index + 1);
    let reports = [
        event(
            task::STAGE_STARTED,
            "execute",
            json!({ "stage": task::STAGE_EXECUTE }),
        ),
        event(
            task::STEP_STARTED,
            "step started",
            json!({ "stepIndex": index, "stepId": id }),
        ),
        event(
            task::STEP_LOG,
            "a line the agent printed",
            json!({ "stepIndex": index, "stream": "stdout" }),
        ),
        event(
            task::ITERATION_STARTED,
            "iteration 1",
            json!({ "iteration": 1, "maxIterations": 3 }),
        ),
        event(
            task::ITERATION_FINISHED,
            "iteration 1 done",
            json!({
                "iteration": 1,
                "maxIterations": 3,
                "outcome": "succeeded",
                "usage": { "inputTokens": 1200, "outputTokens": 300, "durationMs": 4000 }
            }),
        ),
        event(
            task::STEP_FINISHED,
            "step finished",
            json!({ "stepIndex": index, "stepId": id }),
        ),
        event(
            task::CHECKPOINT,
            "checkpoint saved",
            Value::Object(
                CheckpointSaved {
                    after_step: Some(index),
                    after_iteration: None,
                    base_commit: "0123abcd".into(),
                    artifact: task::step_checkpoint(index),
                    steps_done: None,
                    round: None,
                    branch: None,
                }
                .payload(),
            ),
        ),
    ];
    for report in reports {
        h.queue
            .append_event(&job.id, &fence(job), report)
            .await
            .unwrap();
    }
}

pub(crate) async fn complete(h: &Harness, job: &Job) -> Job {
    h.advance(Duration::from_millis(250));
    h.queue
        .complete(&job.id, &fence(job), Some("done".into()))
        .await
        .unwrap()
}

/// Completes `jobs` in one call, each with its summary "done".
pub(crate) async fn complete_all(h: &Harness, jobs: &[Job]) {
    let done = h
        .queue
        .complete_many(
            jobs.iter()
                .map(|job| Completion {
                    id: job.id,
                    fence: fence(job),
                    summary: Some("done".into()),
                })
                .collect(),
        )
        .await
        .unwrap();
    assert!(done.iter().all(Result::is_ok), "{done:?}");
}

/// A minute after it ended, bob asks the job for more: its next round.
pub(crate) async fn follow_up(h: &Harness, job: &Job) {
    h.advance(Duration::from_secs(60));
    h.queue
        .follow_up(
            &job.id,
            Some("bob"),
            &json!({ "instructions": "and the docs" }),
        )
        .await
        .unwrap();
}

fn rescuer(h: &Harness) -> Rescuer {
    Rescuer::new(h.queue.clone(), RescuerConfig::default())
}

pub async fn a_job_that_succeeds_reads_as_it_always_did(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    for index in 0..3 {
        run_step(&h, &claimed, index).await;
    }
    complete(&h, &claimed).await;
    golden(&h, "succeeds", &[job.id]).await;
}

pub async fn a_job_that_fails_reads_as_it_always_did(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    run_step(&h, &claimed, 0).await;
    h.queue
        .append_event(
            &job.id,
            &fence(&claimed),
            event(
                task::STEP_FAILED,
                "step failed",
                json!({ "stepIndex": 1, "stepId": "step-2" }),
            ),
        )
        .await
        .unwrap();
    h.queue
        .fail(&job.id, &fence(&claimed), "the agent gave up".into(), false)
        .await
        .unwrap();
    golden(&h, "fails", &[job.id]).await;
}

pub async fn a_job_that_retries_reads_as_it_always_did(h: Harness) {
    let job = task_job(&h, false).await;
    let first = h.claim_exactly("w1", &job).await;
    run_step(&h, &first, 0).await;
    h.queue
        .fail(&job.id, &fence(&first), "the network went".into(), true)
        .await
        .unwrap();
    h.advance(Duration::from_secs(3600));
    let second = h.claim_exactly("w2", &job).await;
    run_step(&h, &second, 0).await;
    complete(&h, &second).await;
    golden(&h, "retries", &[job.id]).await;
}

pub async fn a_job_whose_lease_expires_reads_as_it_always_did(h: Harness) {
    let job = task_job(&h, false).await;
    let first = h.claim_exactly("w1", &job).await;
    run_step(&h, &first, 0).await;
    h.advance(LEASE * 2);
    assert_eq!(rescuer(&h).run_once().await.unwrap().total(), 1);
    h.advance(Duration::from_secs(3600));
    let second = h.claim_exactly("w2", &job).await;
    run_step(&h, &second, 0).await;
    // The second lease expires too, on the last attempt but one, then the third runs out.
    h.advance(LEASE * 2);
    assert_eq!(rescuer(&h).run_once().await.unwrap().total(), 1);
    h.advance(Duration::from_secs(3600));
    let third = h.claim_exactly("w3", &job).await;
    h.advance(LEASE * 2);
    assert_eq!(rescuer(&h).run_once().await.unwrap().total(), 1);
    assert_eq!(h.get(&third).await.status, contract::JobState::DeadLetter);
    golden(&h, "expires", &[job.id]).await;
}

pub async fn jobs_cancelled_queued_and_running_read_as_they_always_did(h: Harness) {
    let queued = task_job(&h, false).await;
    let running = task_job(&h, false).await;
    h.queue
        .request_cancel(&queued.id, Some("bob"), Some("not now".into()))
        .await
        .unwrap();
    let claimed = h.claim_exactly("w1", &running).await;
    run_step(&h, &claimed, 0).await;
    h.queue
        .request_cancel(&running.id, Some("bob"), None)
        .await
        .unwrap();
    h.advance(Duration::from_millis(250));
    h.queue
        .append_event(
            &running.id,
            &fence(&claimed),
            event(
                task::STEP_CANCELLED,
                "step cancelled",
                json!({ "stepIndex": 1, "stepId": "step-2" }),
            ),
        )
        .await
        .unwrap();
    h.queue
        .ack_cancel(&running.id, &fence(&claimed))
        .await
        .unwrap();
    golden(&h, "cancelled", &[queued.id, running.id]).await;
}

pub async fn a_job_paused_and_resumed_reads_as_it_always_did(h: Harness) {
    let job = task_job(&h, false).await;
    let first = h.claim_exactly("w1", &job).await;
    run_step(&h, &first, 0).await;
    h.queue
        .request_pause(&job.id, Some("bob"), false)
        .await
        .unwrap();
    h.queue.ack_pause(&job.id, &fence(&first)).await.unwrap();
    h.advance(Duration::from_secs(60));
    h.queue.resume(&job.id, Some("bob"), None).await.unwrap();
    let second = h.claim_exactly("w2", &job).await;
    for index in 1..3 {
        run_step(&h, &second, index).await;
    }
    complete(&h, &second).await;
    golden(&h, "paused", &[job.id]).await;
}

pub async fn a_job_approved_at_its_gate_reads_as_it_always_did(h: Harness) {
    let job = task_job(&h, true).await;
    let first = h.claim_exactly("w1", &job).await;
    for index in 0..3 {
        run_step(&h, &first, index).await;
    }
    h.queue
        .request_approval(&job.id, &fence(&first))
        .await
        .unwrap();
    h.advance(Duration::from_secs(60));
    h.queue.approve(&job.id, Some("bob")).await.unwrap();
    let second = h.claim_exactly("w2", &job).await;
    complete(&h, &second).await;
    golden(&h, "approved", &[job.id]).await;
}

pub async fn a_job_looped_and_followed_up_reads_as_it_always_did(h: Harness) {
    let job = task_job(&h, false).await;
    let first = h.claim_exactly("w1", &job).await;
    for index in 0..3 {
        run_step(&h, &first, index).await;
    }
    complete(&h, &first).await;
    follow_up(&h, &job).await;
    let second = h.claim_exactly("w2", &job).await;
    run_step(&h, &second, 3).await;
    complete(&h, &second).await;
    golden(&h, "looped", &[job.id]).await;
}

pub async fn jobs_claimed_and_completed_in_batches_read_as_they_always_did(h: Harness) {
    let jobs = [task_job(&h, false).await, task_job(&h, false).await];
    let claimed = h.queue.claim_many(&request("w1"), 5).await.unwrap();
    assert_eq!(claimed.len(), 2);
    for job in &claimed {
        run_step(&h, job, 0).await;
    }
    h.advance(Duration::from_millis(250));
    complete_all(&h, &claimed).await;
    golden(&h, "batched", &[jobs[0].id, jobs[1].id]).await;
}

/// Reads each job's timeline every way a reader can, insists the ways agree, and compares
/// the timelines and the jobs as they end with `golden/<name>.json`.
pub(crate) async fn golden(h: &Harness, name: &str, jobs: &[JobId]) {
    let mut read = Vec::new();
    for (n, id) in jobs.iter().enumerate() {
        let events = every_reading(h, id).await;
        let job = h.queue.get_job(id).await.unwrap();
        let mut job = serde_json::to_value(&job).unwrap();
        job.as_object_mut().unwrap().remove("id");
        let label = format!("JOB{}", n + 1);
        read.push(json!({
            "job": anonymous(job, jobs),
            "events": events
                .iter()
                .map(|e| anonymous(shown(e), jobs))
                .collect::<Vec<_>>(),
            "as": label,
        }));
    }
    let found = serde_json::to_string_pretty(&Value::Array(read)).unwrap() + "\n";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/golden")
        .join(format!("{name}.json"));
    if std::env::var_os("STEPWISE_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &found).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; STEPWISE_BLESS=1 writes it from this run",
            path.display()
        )
    });
    if expected != found {
        let first = expected
            .lines()
            .zip(found.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(found.lines().count()));
        panic!(
            "{name} ({:?}): the timeline differs from {} at line {}:\n  expected: {}\n  found:    {}",
            h.backend,
            path.display(),
            first + 1,
            expected.lines().nth(first).unwrap_or("(the end)"),
            found.lines().nth(first).unwrap_or("(the end)"),
        );
    }
}

/// The job's events read from the start, from the end, one by one after each cursor, and
/// without log lines; every reading must agree with the first, and ids must grow.
pub(crate) async fn every_reading(h: &Harness, id: &JobId) -> Vec<JobEvent> {
    let all = h.queue.list_events(id, 0, 1000).await.unwrap();
    assert!(
        all.windows(2).all(|w| w[0].id < w[1].id),
        "ids grow along a timeline: {:?}",
        all.iter().map(|e| (e.id, &e.kind)).collect::<Vec<_>>()
    );
    let latest = h.queue.list_latest_events(id, 1000).await.unwrap();
    assert_eq!(latest, all, "read from the end");
    let tail = h.queue.list_latest_events(id, 3).await.unwrap();
    assert_eq!(tail, all[all.len().saturating_sub(3)..], "the last three");
    let mut one_by_one = Vec::new();
    let mut after = 0;
    loop {
        let page = h.queue.list_events(id, after, 1).await.unwrap();
        let Some(event) = page.into_iter().next() else {
            break;
        };
        after = event.id;
        one_by_one.push(event);
    }
    assert_eq!(one_by_one, all, "read by cursor one at a time");
    let without_logs = h
        .queue
        .list_events_except(id, task::STEP_LOG, 0, 1000)
        .await
        .unwrap();
    let expected: Vec<JobEvent> = all
        .iter()
        .filter(|e| e.kind != task::STEP_LOG)
        .cloned()
        .collect();
    assert_eq!(without_logs, expected, "read without log lines");
    assert_eq!(
        h.queue.count_events(id).await.unwrap(),
        u64::try_from(all.len()).unwrap(),
        "counted"
    );
    all
}

/// An event as the golden file holds it: its place instead of its id (ids are global), its
/// time from the harness's start.
fn shown(event: &JobEvent) -> Value {
    let at = (event.created_at - start_time()).num_milliseconds();
    json!({
        "kind": event.kind,
        "level": event.level,
        "message": event.message,
        "payload": Value::Object(event.payload.clone()),
        "atMs": at,
    })
}

/// `value` with each job's id written as its label, wherever it appears.
fn anonymous(value: Value, jobs: &[JobId]) -> Value {
    match value {
        Value::String(text) => {
            let mut text = text;
            for (n, id) in jobs.iter().enumerate() {
                text = text.replace(&id.to_string(), &format!("JOB{}", n + 1));
            }
            Value::String(text)
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| anonymous(v, jobs)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, anonymous(v, jobs)))
                .collect::<Map<String, Value>>(),
        ),
        other => other,
    }
}
