//! A whole task run, stage by stage, for real: a bare remote, the mirror cache, the scripted
//! agent as the `claude` CLI, the recorded gh shim, and the reports collected in order.

use std::path::{Path, PathBuf};
use std::time::Duration;

use contract::job::task;
use contract::{Defaults, NormalizedTask};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use worker::redact::Redactor;
use worker::stages::{Credentials, Report, StageConfig, TaskOutcome, Unshared, Warrant, run_task};
use worker::testing::{artifact_names, remote, run, run_stages, stage_config};

/// The id the tests run their task as; its workspace is `workdir/{JOB_1}`.
const JOB_1: &str = "0190a000-0000-7000-8000-000000000001";

const SECRET: &str = "ghp_0123456789abcdefghijABCDEFGHIJ0123456789";

struct Setup {
    tmp: tempfile::TempDir,
    remote: String,
    config: StageConfig,
    gh_log: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let skills = tmp.path().join("skills/speckit");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(skills.join("SKILL.md"), "# speckit\n").unwrap();
    let config = stage_config(tmp.path());
    let gh_log = tmp.path().join("gh.log");
    Setup {
        tmp,
        remote,
        config,
        gh_log,
    }
}

fn task(remote: &str, publish: &str, steps: Value) -> NormalizedTask {
    let raw = json!({ "payload": {
        "repository": remote,
        "task": {
            "instructions": "Greet the world",
            "runtime": { "mode": "claude", "model": "opus" },
            "publish": { "mode": publish },
            "steps": steps,
        },
    }});
    contract::normalize(&raw, &Defaults::default()).unwrap()
}

async fn run_it(
    setup: &Setup,
    task: &NormalizedTask,
    cancel: &CancellationToken,
) -> (TaskOutcome, Vec<Report>) {
    run_as(setup, JOB_1, task, cancel).await
}

async fn run_as(
    setup: &Setup,
    job_id: &str,
    task: &NormalizedTask,
    cancel: &CancellationToken,
) -> (TaskOutcome, Vec<Report>) {
    run_stages(&setup.config, job_id, task, &[SECRET], cancel).await
}

/// The events' kinds, step logs left out, with the stage or step they concern.
fn timeline(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .filter_map(|r| match r {
            Report::Event { kind, payload, .. } if kind != task::STEP_LOG => {
                Some(match payload.get("stage") {
                    Some(stage) => format!("{kind} {}", stage.as_str().unwrap_or_default()),
                    None => match payload.get("stepIndex") {
                        Some(i) => format!("{kind} {i}"),
                        None => kind.clone(),
                    },
                })
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_step_runs_in_order_then_the_task_is_published_once() {
    let setup = setup();
    let task = task(
        &setup.remote,
        "pr",
        json!([
            { "title": "Write", "instructions": "@fake write greeting.txt hello" },
            { "instructions": "@fake say checking", "skill": { "id": "speckit" } },
            { "instructions": "@fake write greeting.txt world" },
        ]),
    );
    let (outcome, reports) = run_it(&setup, &task, &CancellationToken::new()).await;
    assert_eq!(
        outcome,
        TaskOutcome::Succeeded {
            summary: "pull request https://github.com/octo/hello/pull/7".into()
        }
    );
    let prepare = task::STAGE_PREPARE;
    let execute = task::STAGE_EXECUTE;
    let publish = task::STAGE_PUBLISH;
    assert_eq!(
        timeline(&reports),
        [
            format!("task.stage.started {prepare}"),
            format!("task.stage.finished {prepare}"),
            format!("task.stage.started {execute}"),
            "task.steps.plan".into(),
            "task.step.started 0".into(),
            "task.step.finished 0".into(),
            "task.checkpoint".into(),
            "task.step.started 1".into(),
            "task.step.finished 1".into(),
            "task.checkpoint".into(),
            "task.step.started 2".into(),
            "task.step.finished 2".into(),
            "task.checkpoint".into(),
            format!("task.stage.finished {execute}"),
            format!("task.stage.started {publish}"),
            format!("task.stage.finished {publish}"),
        ]
    );
    let Some(Report::Event { payload: plan, .. }) = reports
        .iter()
        .find(|r| matches!(r, Report::Event { kind, .. } if kind == task::STEPS_PLAN))
    else {
        panic!("no plan")
    };
    assert_eq!(
        plan,
        &json!({ "count": 3, "stepIds": ["step-1", "step-2", "step-3"] })
    );
    let mut second = reports.iter().find_map(|r| match r {
        Report::Event { kind, payload, .. }
            if kind == task::STEP_FINISHED && payload["stepIndex"] == 1 =>
        {
            Some(payload.clone())
        }
        _ => None,
    });
    // The worker timed the agent (a budget's minutes count it); nothing else is in usage.
    let usage = second
        .as_mut()
        .and_then(|p| p.as_object_mut()?.remove("usage"));
    let usage = usage.expect("the agent's time");
    assert!(usage["durationMs"].is_u64(), "{usage}");
    assert_eq!(usage.as_object().unwrap().len(), 1, "{usage}");
    assert_eq!(
        second,
        Some(
            json!({ "stepIndex": 1, "stepId": "step-2", "effectiveSkill": "speckit", "hasStepInstructions": true, "summary": "done" })
        )
    );
    assert_eq!(
        artifact_names(&reports),
        [
            "task_context.json",
            "logs/prepare.log",
            "logs/steps/step-0000.log",
            "session/agent.json",
            "patches/steps/step-0000.patch",
            "checkpoints/step-0000.patch",
            "logs/steps/step-0001.log",
            "session/agent.json",
            "patches/steps/step-0001.patch",
            "checkpoints/step-0001.patch",
            "logs/steps/step-0002.log",
            "session/agent.json",
            "patches/steps/step-0002.patch",
            "checkpoints/step-0002.patch",
            "logs/execute.log",
            "patches/changes.patch",
            "publish_result.json",
            "logs/publish.log",
        ]
    );
    let artifacts_dir = setup.config.workdir.join(format!("{JOB_1}/artifacts"));
    let step0 =
        std::fs::read_to_string(artifacts_dir.join("patches/steps/step-0000.patch")).unwrap();
    assert!(
        step0.contains("+hello") && !step0.contains("+world"),
        "{step0}"
    );
    let all = std::fs::read_to_string(artifacts_dir.join("patches/changes.patch")).unwrap();
    assert!(all.contains("+hello") && all.contains("+world"), "{all}");
    let context: Value = serde_json::from_str(
        &std::fs::read_to_string(artifacts_dir.join("task_context.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(context["git"]["startingBranch"], "main");
    assert_eq!(context["skills"], json!(["speckit"]));
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(artifacts_dir.join("publish_result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(result["status"], "pr_created");
    // The agent saw the skill where it looks, and the push reached the remote.
    assert!(
        setup
            .config
            .workdir
            .join(format!("{JOB_1}/repo/.claude/skills/speckit/SKILL.md"))
            .is_file()
    );
    let branch = context["git"]["workingBranch"]
        .as_str()
        .unwrap()
        .to_string();
    let pushed = run(
        Path::new(&setup.remote),
        &["show", &format!("{branch}:greeting.txt")],
    );
    assert_eq!(pushed, "hello\nworld");
    assert!(
        std::fs::read_to_string(&setup.gh_log)
            .unwrap()
            .contains("--base main")
    );
}

#[tokio::test]
async fn a_failed_step_stops_the_run_and_nothing_is_published() {
    let setup = setup();
    let task = task(
        &setup.remote,
        "branch",
        json!([
            { "instructions": "@fake write a.txt one" },
            { "instructions": "@fake fail 3" },
            { "instructions": "@fake write b.txt never" },
        ]),
    );
    let (outcome, reports) = run_it(&setup, &task, &CancellationToken::new()).await;
    assert_eq!(
        outcome,
        TaskOutcome::Failed {
            stage: task::STAGE_EXECUTE,
            message: "failed on purpose".into()
        }
    );
    let timeline = timeline(&reports);
    assert!(
        timeline.contains(&"task.step.failed 1".to_string()),
        "{timeline:?}"
    );
    assert!(
        !timeline.iter().any(|e| e.ends_with(" 2")),
        "step 3 ran: {timeline:?}"
    );
    assert!(
        !timeline.iter().any(|e| e.contains(task::STAGE_PUBLISH)),
        "{timeline:?}"
    );
    assert!(
        !setup
            .config
            .workdir
            .join(format!("{JOB_1}/repo/b.txt"))
            .exists()
    );
    let branches = run(Path::new(&setup.remote), &["branch", "--list"]);
    assert!(!branches.contains("task/"), "{branches}");
}

#[tokio::test]
async fn cancelling_a_running_step_stops_it_and_skips_the_rest() {
    let setup = setup();
    let task = task(
        &setup.remote,
        "branch",
        json!([
            { "instructions": "@fake ignore-term\n@fake say started\n@fake sleep 60" },
            { "instructions": "@fake write b.txt never" },
        ]),
    );
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let redactor = Redactor::default();
    let config = setup.config.clone();
    let stopper = cancel.clone();
    let running = tokio::spawn(async move {
        run_task(
            &config,
            &JOB_1.parse().unwrap(),
            &task,
            Warrant {
                redactor: &redactor,
                credentials: &Credentials::default(),
                hold: &Unshared,
                restore: None,
                pause: &worker::stages::Pause::default(),
                approved: false,
                spent: Default::default(),
            },
            &stopper,
            tx,
        )
        .await
    });
    let mut reports = Vec::new();
    while let Some(report) = rx.recv().await {
        let started = matches!(&report, Report::Event { kind, message, .. } if kind == task::STEP_LOG && message.contains("started"));
        reports.push(report);
        if started {
            cancel.cancel();
            break;
        }
    }
    let outcome = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .unwrap()
        .unwrap();
    while let Ok(report) = rx.try_recv() {
        reports.push(report);
    }
    let TaskOutcome::Cancelled { stage, stop } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(stage, task::STAGE_EXECUTE);
    assert!(stop >= setup.config.limits.grace, "{stop:?}");
    let timeline = timeline(&reports);
    assert!(
        timeline.contains(&"task.step.cancelled 0".to_string()),
        "{timeline:?}"
    );
    assert!(!timeline.iter().any(|e| e.ends_with(" 1")), "{timeline:?}");
    assert!(
        !timeline.iter().any(|e| e.contains(task::STAGE_PUBLISH)),
        "{timeline:?}"
    );
}

#[tokio::test]
async fn secrets_never_reach_events_logs_or_artifacts() {
    let setup = setup();
    let task = task(
        &setup.remote,
        "none",
        json!([{ "instructions": format!("@fake say the key is {SECRET}\n@fake write notes.txt {SECRET}") }]),
    );
    let (outcome, reports) = run_it(&setup, &task, &CancellationToken::new()).await;
    assert!(
        matches!(outcome, TaskOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    for report in &reports {
        let text = format!("{report:?}");
        assert!(!text.contains(SECRET), "{text}");
        if let Report::Artifact { path, .. } = report {
            let body = std::fs::read_to_string(path).unwrap();
            assert!(!body.contains(SECRET), "{}: {body}", path.display());
        }
    }
    assert!(
        reports
            .iter()
            .any(|r| format!("{r:?}").contains("[REDACTED]"))
    );
    let _ = setup.tmp.path();
}

/// Whether `text` holds the secret, whole or any long enough start of it (a secret cut
/// short matches no pattern, so it would leak in part).
fn leaks(text: &str) -> bool {
    text.contains(&SECRET[..12])
}

fn reports_text(reports: &[Report]) -> String {
    reports
        .iter()
        .map(|report| match report {
            Report::Artifact { path, .. } => std::fs::read_to_string(path).unwrap_or_default(),
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_failing_steps_agent_text_is_redacted_before_it_becomes_the_jobs_error() {
    let setup = setup();
    let task = task(
        &setup.remote,
        "none",
        json!([{ "instructions": format!("@fake fail-with 1 could not push with {SECRET}, giving up") }]),
    );
    let (outcome, reports) = run_it(&setup, &task, &CancellationToken::new()).await;
    let TaskOutcome::Failed { message, .. } = outcome else {
        panic!("expected a failure, got {outcome:?}")
    };
    assert_eq!(message, "could not push with [REDACTED], giving up");
    let text = reports_text(&reports);
    assert!(!leaks(&text), "{text}");
}

#[tokio::test]
async fn a_secret_across_the_summarys_cut_is_redacted_whole_first() {
    let setup = setup();
    // The summary keeps 500 characters: the secret starts at 480 and ends past the cut.
    let before = "x".repeat(480);
    let task = task(
        &setup.remote,
        "none",
        json!([{ "instructions": format!("@fake fail-with 1 {before}{SECRET} and more") }]),
    );
    let (outcome, reports) = run_it(&setup, &task, &CancellationToken::new()).await;
    let TaskOutcome::Failed { message, .. } = outcome else {
        panic!("expected a failure, got {outcome:?}")
    };
    assert!(!leaks(&message), "{message}");
    assert_eq!(message, format!("{before}[REDACTED] and more"));
    let text = reports_text(&reports);
    assert!(!leaks(&text), "{text}");
}

#[tokio::test]
async fn two_jobs_with_one_objective_a_few_seconds_apart_publish_to_branches_of_their_own() {
    let setup = setup();
    // Job ids are UUIDv7: the first 8 hex digits are the same for ~65 s of creation times.
    let ids = [
        "0190f3a2-1b2c-7d3e-8f40-5a6b7c8d9e01",
        "0190f3a2-40aa-7123-9abc-0123456789ab",
    ];
    for (id, file) in ids.iter().zip(["one.txt", "two.txt"]) {
        let task = task(
            &setup.remote,
            "branch",
            json!([{ "instructions": format!("@fake write {file} hi") }]),
        );
        let (outcome, _) = run_as(&setup, id, &task, &CancellationToken::new()).await;
        assert!(
            matches!(outcome, TaskOutcome::Succeeded { .. }),
            "job {id}: {outcome:?}"
        );
    }
    let branches = run(Path::new(&setup.remote), &["branch", "--list", "task/*"]);
    assert_eq!(branches.lines().count(), 2, "{branches}");
}
