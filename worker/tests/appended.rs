//! Steps appended to a job while it runs, as the stages take them: read at each step
//! boundary through the run's hold on the job, said again as the plan, their skills made
//! ready, and run in the same attempt. A real remote and the scripted agent.

use std::sync::Mutex;

use contract::job::task;
use contract::{Defaults, NormalizedTask};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use worker::redact::Redactor;
use worker::stages::{Credentials, Hold, Pause, Report, TaskOutcome, Warrant, run_task};
use worker::testing::{remote, stage_config};

const JOB: &str = "0190a000-0000-7000-8000-0000000000a1";

/// A hold whose job gains `later` at the read after the last step (the settled one), as a
/// job does when an operator appends just as its last step ends; every read is counted.
struct AppendsLate {
    later: Mutex<Option<NormalizedTask>>,
    reads: Mutex<Vec<bool>>,
}

impl Hold for AppendsLate {
    fn confirm(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    fn latest_task(&self, settled: bool) -> BoxFuture<'_, Option<NormalizedTask>> {
        self.reads.lock().unwrap().push(settled);
        let task = if settled {
            self.later.lock().unwrap().take()
        } else {
            None
        };
        Box::pin(async move { task })
    }
}

fn task(remote: &str, steps: Value) -> NormalizedTask {
    let raw = json!({ "payload": {
        "repository": remote,
        "task": {
            "instructions": "Greet",
            "runtime": { "mode": "claude" },
            "publish": { "mode": "none" },
            "steps": steps,
        },
    }});
    contract::normalize(&raw, &Defaults::default()).unwrap()
}

fn appended(to: &NormalizedTask, steps: Value) -> NormalizedTask {
    let payload = serde_json::to_value(&to.payload).unwrap();
    contract::append_steps(&payload, &steps, &Defaults::default()).unwrap()
}

async fn run(
    config: &worker::stages::StageConfig,
    task: &NormalizedTask,
    hold: &AppendsLate,
) -> (TaskOutcome, Vec<Report>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let redactor = Redactor::default();
    let warrant = Warrant {
        redactor: &redactor,
        credentials: &Credentials::default(),
        hold,
        restore: None,
        pause: &Pause::default(),
        approved: false,
        spent: Default::default(),
    };
    let cancel = CancellationToken::new();
    let outcome = run_task(config, &JOB.parse().unwrap(), task, warrant, &cancel, tx).await;
    let mut reports = Vec::new();
    while let Ok(report) = rx.try_recv() {
        reports.push(report);
    }
    (outcome, reports)
}

fn events<'a>(reports: &'a [Report], wanted: &str) -> Vec<&'a Value> {
    reports
        .iter()
        .filter_map(|r| match r {
            Report::Event { kind, payload, .. } if kind == wanted => Some(payload),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_step_appended_as_the_last_step_ends_runs_with_its_skill_in_the_same_run() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let skill = tmp.path().join("skills/reviewer");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(skill.join("SKILL.md"), "# reviewer\n").unwrap();
    let config = stage_config(tmp.path());
    let first = task(
        &remote,
        json!([{ "instructions": "@fake write a.txt one" }]),
    );
    let hold = AppendsLate {
        later: Mutex::new(Some(appended(
            &first,
            json!([{ "instructions": "@fake write b.txt two", "skill": { "id": "reviewer" } }]),
        ))),
        reads: Mutex::new(Vec::new()),
    };
    let (outcome, reports) = run(&config, &first, &hold).await;
    assert!(
        matches!(outcome, TaskOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    // Before step 1, after it (settled: the new step is found), after step 2 (settled).
    assert_eq!(*hold.reads.lock().unwrap(), [false, true, true]);
    let plans = events(&reports, task::STEPS_PLAN);
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[1]["count"], 2);
    assert_eq!(plans[1]["stepIds"], json!(["step-1", "step-2"]));
    let started: Vec<&Value> = events(&reports, task::STEP_STARTED)
        .into_iter()
        .map(|p| &p["stepIndex"])
        .collect();
    assert_eq!(started, [&json!(0), &json!(1)]);
    // One checkpoint after each step, the new one's too.
    assert_eq!(events(&reports, task::CHECKPOINT).len(), 2);
    let job = config.workdir.join(JOB);
    assert_eq!(
        std::fs::read_to_string(job.join("repo/b.txt")).unwrap(),
        "two\n"
    );
    assert!(job.join("repo/.claude/skills/reviewer/SKILL.md").is_file());
    let log = std::fs::read_to_string(
        job.join("artifacts")
            .join(task::stage_log(task::STAGE_EXECUTE)),
    )
    .unwrap();
    assert!(log.contains("1 step(s) appended: 2 in all"), "{log}");
    assert!(log.contains("skill reviewer ready"), "{log}");
}

#[tokio::test]
async fn an_appended_step_whose_skill_cannot_run_here_fails_the_run_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let config = stage_config(tmp.path());
    let first = task(
        &remote,
        json!([{ "instructions": "@fake write a.txt one" }]),
    );
    let hold = AppendsLate {
        later: Mutex::new(Some(appended(
            &first,
            json!([{ "instructions": "@fake write b.txt two", "skill": { "id": "absent" } }]),
        ))),
        reads: Mutex::new(Vec::new()),
    };
    let (outcome, _) = run(&config, &first, &hold).await;
    match outcome {
        TaskOutcome::Failed { stage, message } => {
            assert_eq!(stage, task::STAGE_EXECUTE);
            assert!(message.contains("absent"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(!config.workdir.join(JOB).join("repo/b.txt").exists());
}

#[tokio::test]
async fn a_task_that_is_not_the_same_steps_and_more_is_not_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let config = stage_config(tmp.path());
    let first = task(
        &remote,
        json!([{ "instructions": "@fake write a.txt one" }]),
    );
    let other = task(
        &remote,
        json!([
            { "id": "else", "instructions": "@fake write x.txt no" },
            { "instructions": "@fake write y.txt no" },
        ]),
    );
    let hold = AppendsLate {
        later: Mutex::new(Some(other)),
        reads: Mutex::new(Vec::new()),
    };
    let (outcome, reports) = run(&config, &first, &hold).await;
    assert!(
        matches!(outcome, TaskOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    assert_eq!(events(&reports, task::STEPS_PLAN).len(), 1);
    assert!(!config.workdir.join(JOB).join("repo/y.txt").exists());
}
