//! The completion loop (seed 003), for real: a task with a check runs its steps, then the
//! check in the workspace; while it fails, the scripted agent runs again, up to the task's
//! iterations. Publish comes once, after the check passes.

use std::path::Path;
use std::time::{Duration, Instant};

use contract::job::task;
use contract::{Defaults, NormalizedTask};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use worker::stages::{Report, TaskOutcome};
use worker::testing::{artifact_names, remote, run, run_stages, stage_config};

const JOB: &str = "0190a000-0000-7000-8000-0000000000c1";
const SECRET: &str = "ghp_0123456789abcdefghijABCDEFGHIJ0123456789";

/// A task whose objective appends a line to `counter.txt` at every agent run (each prompt,
/// a step's or an iteration's, starts with the objective), with `completion`.
fn task(remote: &str, completion: Value) -> NormalizedTask {
    let raw = json!({ "payload": {
        "repository": remote,
        "task": {
            "instructions": "Count the runs\n@fake write counter.txt run\n@fake say counted",
            "runtime": { "mode": "claude" },
            "publish": { "mode": "branch" },
            "steps": [{ "instructions": "Start counting" }],
            "completion": completion,
        },
    }});
    contract::normalize(&raw, &Defaults::default()).unwrap()
}

async fn run_it(
    tmp: &Path,
    task: &NormalizedTask,
    cancel: &CancellationToken,
) -> (TaskOutcome, Vec<Report>) {
    run_stages(&stage_config(tmp), JOB, task, &[SECRET], cancel).await
}

/// The iteration events' payloads, in order.
fn iterations(reports: &[Report]) -> Vec<(String, Value)> {
    reports
        .iter()
        .filter_map(|r| match r {
            Report::Event { kind, payload, .. } if kind.starts_with("task.iteration.") => {
                Some((kind.clone(), payload.clone()))
            }
            _ => None,
        })
        .collect()
}

fn kinds(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .filter_map(|r| match r {
            Report::Event { kind, payload, .. } if kind != task::STEP_LOG => {
                Some(match payload.get("iteration").or(payload.get("stage")) {
                    Some(v) => format!(
                        "{kind} {}",
                        v.as_str().map_or(v.to_string(), str::to_string)
                    ),
                    None => kind.clone(),
                })
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_failing_check_runs_the_agent_again_until_it_passes_at_iteration_3_then_publishes_once() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let check = "echo \"runs: $(wc -l < counter.txt)\"; test $(wc -l < counter.txt) -ge 4";
    let task = task(
        &remote,
        json!({ "command": check, "maxIterations": 5,
        "criteria": "the agent ran four times" }),
    );
    let (outcome, reports) = run_it(tmp.path(), &task, &CancellationToken::new()).await;
    assert!(
        matches!(outcome, TaskOutcome::Succeeded { .. }),
        "{outcome:?}\n{:#?}",
        kinds(&reports)
    );
    let kinds = kinds(&reports);
    let loop_part: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|k| k.starts_with("task.iteration."))
        .collect();
    assert_eq!(
        loop_part,
        [
            "task.iteration.started 0",
            "task.iteration.finished 0",
            "task.iteration.started 1",
            "task.iteration.finished 1",
            "task.iteration.started 2",
            "task.iteration.finished 2",
            "task.iteration.started 3",
            "task.iteration.finished 3",
        ]
    );
    // The loop is part of execute, and publish runs once, after it.
    let execute_end = kinds
        .iter()
        .position(|k| k == &format!("{} {}", task::STAGE_FINISHED, task::STAGE_EXECUTE))
        .unwrap();
    let last_iteration = kinds
        .iter()
        .rposition(|k| k.starts_with("task.iteration."))
        .unwrap();
    assert!(last_iteration < execute_end, "{kinds:?}");
    let publishes = kinds
        .iter()
        .filter(|k| *k == &format!("{} {}", task::STAGE_STARTED, task::STAGE_PUBLISH))
        .count();
    assert_eq!(publishes, 1, "{kinds:?}");

    let ends: Vec<Value> = iterations(&reports)
        .into_iter()
        .filter(|(kind, _)| kind == task::ITERATION_FINISHED)
        .map(|(_, payload)| payload)
        .collect();
    let passed: Vec<bool> = ends.iter().map(|e| e["check"]["passed"] == true).collect();
    assert_eq!(passed, [false, false, false, true]);
    assert_eq!(ends[0]["check"]["exitCode"], 1);
    assert_eq!(ends[0]["check"]["outputTail"], "runs: 1\n");
    assert_eq!(ends[3]["check"]["outputTail"], "runs: 4\n");
    assert_eq!(ends[1]["maxIterations"], 5);
    // Iteration 0 runs no agent; the others report what theirs said.
    assert!(ends[0].get("summary").is_none(), "{:?}", ends[0]);
    assert_eq!(ends[1]["summary"], "done");

    let artifacts = artifact_names(&reports);
    for name in [
        task::check_log(0),
        task::iteration_log(1),
        task::iteration_patch(1),
        task::check_log(2),
        task::step_checkpoint(0),
        task::iteration_checkpoint(1),
        task::iteration_checkpoint(2),
        task::iteration_checkpoint(3),
    ] {
        assert!(artifacts.contains(&name), "{name} not in {artifacts:?}");
    }
    // What the iterations did was published with the steps' work.
    let branches = run(Path::new(&remote), &["branch", "--list"]);
    let branch = branches
        .lines()
        .map(|b| b.trim_start_matches(['*', ' ']))
        .find(|b| b.starts_with("task/"))
        .expect("a published branch");
    let counter = run(
        Path::new(&remote),
        &["show", &format!("{branch}:counter.txt")],
    );
    assert_eq!(counter.lines().count(), 4, "{counter}");
}

#[tokio::test]
async fn the_task_fails_after_its_last_iteration_with_the_checks_output_and_publishes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let check = format!("echo 'tests passed'; echo 'token {SECRET} leaked'; echo 'still broken'");
    let task = task(
        &remote,
        json!({ "command": check, "outputPattern": "^all green$", "maxIterations": 1 }),
    );
    let (outcome, reports) = run_it(tmp.path(), &task, &CancellationToken::new()).await;
    let TaskOutcome::Failed { stage, message } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(*stage, task::STAGE_EXECUTE);
    assert!(
        message.starts_with("the completion check still fails after 1 iteration(s)"),
        "{message}"
    );
    assert!(message.contains("still broken"), "{message}");
    assert!(!message.contains(SECRET), "{message}");
    let ends: Vec<Value> = iterations(&reports)
        .into_iter()
        .filter(|(kind, _)| kind == task::ITERATION_FINISHED)
        .map(|(_, payload)| payload)
        .collect();
    assert_eq!(ends.len(), 2);
    for end in &ends {
        // Exit code 0, but the output never matched the pattern.
        assert_eq!(end["check"]["exitCode"], 0, "{end}");
        assert_eq!(end["check"]["patternMatched"], false, "{end}");
        assert_eq!(end["check"]["passed"], false, "{end}");
        assert!(!end.to_string().contains(SECRET), "{end}");
    }
    let kinds = kinds(&reports);
    assert!(
        !kinds.iter().any(|k| k.contains(task::STAGE_PUBLISH)),
        "{kinds:?}"
    );
    let branches = run(Path::new(&remote), &["branch", "--list"]);
    assert!(!branches.contains("task/"), "{branches}");
}

#[tokio::test]
async fn a_check_that_runs_too_long_is_stopped_and_counts_as_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let task = task(
        &remote,
        json!({ "command": "echo waiting; sleep 30", "timeoutSeconds": 1, "maxIterations": 1 }),
    );
    let began = Instant::now();
    let (outcome, reports) = run_it(tmp.path(), &task, &CancellationToken::new()).await;
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    assert!(matches!(outcome, TaskOutcome::Failed { .. }), "{outcome:?}");
    let (_, end) = iterations(&reports)
        .into_iter()
        .find(|(kind, _)| kind == task::ITERATION_FINISHED)
        .unwrap();
    assert_eq!(end["check"]["timedOut"], true, "{end}");
    assert_eq!(end["check"]["outputTail"], "waiting\n", "{end}");
    assert!(end["check"].get("exitCode").is_none(), "{end}");
}

#[tokio::test]
async fn cancelling_during_the_check_stops_its_whole_group_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let pid = tmp.path().join("check.pid");
    let check = format!("sleep 60 & echo $! > {}; wait", pid.display());
    let task = task(&remote, json!({ "command": check }));
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let watched = pid.clone();
    tokio::spawn(async move {
        while !watched.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.cancel();
    });
    let began = Instant::now();
    let (outcome, reports) = run_it(tmp.path(), &task, &cancel).await;
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "{:?}",
        began.elapsed()
    );
    assert!(
        matches!(outcome, TaskOutcome::Cancelled { stage, .. } if stage == task::STAGE_EXECUTE),
        "{outcome:?}"
    );
    let (_, end) = iterations(&reports)
        .into_iter()
        .find(|(kind, _)| kind == task::ITERATION_FINISHED)
        .unwrap();
    assert_eq!(end["outcome"], "cancelled", "{end}");
    // The check's child went with it.
    let child = std::fs::read_to_string(&pid).unwrap();
    let alive = Path::new(&format!("/proc/{}", child.trim())).exists();
    assert!(
        !alive,
        "the check's sleep {} outlived the cancel",
        child.trim()
    );
}

#[tokio::test]
async fn a_checkpoint_after_each_step_and_iteration_holds_all_the_work_so_far() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let raw = json!({ "payload": {
        "repository": remote,
        "task": {
            "instructions": "Write files",
            "runtime": { "mode": "claude" },
            "publish": { "mode": "none" },
            "steps": [
                { "instructions": "@fake write a.txt one" },
                { "instructions": "@fake write b.txt two" },
            ],
        },
    }});
    let task = contract::normalize(&raw, &Defaults::default()).unwrap();
    let (outcome, reports) = run_it(tmp.path(), &task, &CancellationToken::new()).await;
    assert!(
        matches!(outcome, TaskOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    let saved: Vec<Value> = reports
        .iter()
        .filter_map(|r| match r {
            Report::Event { kind, payload, .. } if kind == task::CHECKPOINT => {
                Some(payload.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(saved.len(), 2, "{saved:?}");
    assert_eq!(saved[0]["afterStep"], 0);
    assert_eq!(saved[1]["afterStep"], 1);
    assert_eq!(saved[1]["artifact"], task::step_checkpoint(1));
    let base = saved[0]["baseCommit"].as_str().unwrap();
    assert_eq!(base.len(), 40, "{base}");
    // Each patch is cumulative: the second holds both files.
    let patch = |name: String| {
        reports.iter().find_map(|r| match r {
            Report::Artifact { name: n, path } if *n == name => {
                Some(std::fs::read_to_string(path).unwrap())
            }
            _ => None,
        })
    };
    let first = patch(task::step_checkpoint(0)).unwrap();
    let second = patch(task::step_checkpoint(1)).unwrap();
    assert!(
        first.contains("a.txt") && !first.contains("b.txt"),
        "{first}"
    );
    assert!(
        second.contains("a.txt") && second.contains("b.txt"),
        "{second}"
    );
    // A checkpoint applies onto a fresh checkout of the base commit.
    let fresh = tmp.path().join("fresh");
    run(
        tmp.path(),
        &["clone", "-q", &remote, fresh.to_str().unwrap()],
    );
    run(&fresh, &["checkout", "-q", base]);
    std::fs::write(tmp.path().join("cp.patch"), &second).unwrap();
    run(
        &fresh,
        &["apply", tmp.path().join("cp.patch").to_str().unwrap()],
    );
    assert_eq!(
        std::fs::read_to_string(fresh.join("b.txt")).unwrap(),
        "two\n"
    );
}
