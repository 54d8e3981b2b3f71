//! The job's agent session across its runs, with the scripted agent keeping its sessions
//! as claude does: later steps continue the first step's session; an attempt on another
//! machine continues the session the job kept; one that cannot says so and is told the
//! job's history.

use std::path::{Path, PathBuf};

use contract::events::{CheckpointSaved, SessionRestarted, TaskEvent};
use contract::job::task;
use contract::session::{AGENT_SESSION, KeptSession, SessionLoss};
use contract::{Defaults, NormalizedTask, RuntimeMode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use worker::stages::{Pause, Report, Restore, TaskOutcome};
use worker::testing::{remote, run_stages, run_stages_from, stage_config};

const JOB: &str = "0190a000-0000-7000-8000-0000000000c1";

fn task(remote: &str, steps: Value) -> NormalizedTask {
    let raw = json!({ "payload": {
        "repository": remote,
        "task": {
            "instructions": "Greet the world",
            "runtime": { "mode": "claude" },
            "publish": { "mode": "none" },
            "steps": steps,
        },
    }});
    contract::normalize(&raw, &Defaults::default()).unwrap()
}

/// The stages of a machine of its own under `root`.
fn machine(root: &Path) -> worker::stages::StageConfig {
    std::fs::create_dir_all(root).unwrap();
    stage_config(root)
}

fn artifacts(root: &Path) -> PathBuf {
    root.join(format!("work/{JOB}/artifacts"))
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn restarted(reports: &[Report]) -> Vec<SessionRestarted> {
    reports
        .iter()
        .filter_map(|r| match r {
            Report::Event { kind, payload, .. } if kind == task::SESSION_RESTARTED => {
                Some(serde_json::from_value(payload.clone()).unwrap())
            }
            _ => None,
        })
        .collect()
}

/// A first attempt on one machine that runs step 1 and fails step 2 (until `go` exists):
/// the checkpoint after step 1, its patch, and the session the job kept.
async fn first_attempt(
    tmp: &Path,
    go: &Path,
) -> (NormalizedTask, CheckpointSaved, Vec<u8>, KeptSession) {
    let remote = remote(tmp);
    let task = task(
        &remote,
        json!([
            { "title": "Write", "instructions": "@fake write notes.txt one\n@fake history" },
            { "title": "Check", "instructions": format!("@fake fail-unless {}\n@fake history", go.display()) },
        ]),
    );
    let first = tmp.join("first");
    let config = machine(&first);
    let (outcome, reports) = run_stages(&config, JOB, &task, &[], &CancellationToken::new()).await;
    assert!(matches!(outcome, TaskOutcome::Failed { .. }), "{outcome:?}");
    let checkpoint = reports
        .iter()
        .find_map(|r| match r {
            Report::Event { kind, payload, .. } if kind == CheckpointSaved::KIND => {
                Some(serde_json::from_value::<CheckpointSaved>(payload.clone()).unwrap())
            }
            _ => None,
        })
        .expect("a checkpoint after step 1");
    let patch = std::fs::read(artifacts(&first).join(&checkpoint.artifact)).unwrap();
    let kept = KeptSession::read(read(artifacts(&first).join(AGENT_SESSION)).as_bytes()).unwrap();
    (task, checkpoint, patch, kept)
}

#[tokio::test]
async fn later_steps_continue_the_session_the_first_step_began() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let task = task(
        &remote,
        json!([
            { "instructions": "@fake history\n@fake cost 0.25" },
            { "instructions": "@fake history\n@fake cost 0.25" },
            { "instructions": "@fake history\n@fake cost 0.25" },
        ]),
    );
    let mut config = stage_config(tmp.path());
    let argv_log = tmp.path().join("argv.log");
    config.binaries.claude = wrapped_with_log(tmp.path(), &argv_log);
    let (outcome, reports) = run_stages(&config, JOB, &task, &[], &CancellationToken::new()).await;
    assert!(
        matches!(outcome, TaskOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    for (index, held) in [(0, 0), (1, 1), (2, 2)] {
        let log = read(artifacts(tmp.path()).join(task::step_log(index)));
        assert!(
            log.contains(&format!("the session held {held} prompt(s)")),
            "step {index}: {log}"
        );
    }
    let kept =
        KeptSession::read(read(artifacts(tmp.path()).join(AGENT_SESSION)).as_bytes()).unwrap();
    assert_eq!(kept.runtime, RuntimeMode::Claude);
    assert!(kept.path.starts_with(".claude/projects/"), "{}", kept.path);
    assert_eq!(
        kept.content
            .lines()
            .filter(|l| l.contains("\"user\""))
            .count(),
        3,
        "every step's prompt"
    );
    // claude reports a continued session's total price; each step is said to cost its own.
    let costs: Vec<Value> = reports
        .iter()
        .filter_map(|r| match r {
            Report::Event { kind, payload, .. } if kind == task::STEP_FINISHED => {
                Some(payload["usage"]["costUsd"].clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(costs, [json!(0.25), json!(0.25), json!(0.25)]);
    assert_eq!(kept.totals.and_then(|t| t.cost_usd), Some(0.75));
    let argv = read(argv_log);
    let id = &kept.session_id;
    assert_eq!(
        argv.matches(&format!("--session-id {id}")).count(),
        1,
        "{argv}"
    );
    assert_eq!(argv.matches(&format!("--resume {id}")).count(), 2, "{argv}");
    assert!(restarted(&reports).is_empty());
}

/// The scripted agent, with its argv logged to `log`.
fn wrapped_with_log(dir: &Path, log: &Path) -> PathBuf {
    let path = dir.join("claude-logged");
    let script = format!(
        "#!/usr/bin/env bash\nexport FAKE_AGENT_LOG={}\nexec {} \"$@\"\n",
        log.display(),
        worker::testing::fixture("fake-agent").display()
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn another_machine_continues_the_session_the_job_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("go");
    let (task, checkpoint, patch, kept) = first_attempt(tmp.path(), &go).await;
    assert_eq!(
        kept.content.lines().count(),
        2,
        "the failed step's prompt too"
    );
    std::fs::write(&go, "").unwrap();
    let second = tmp.path().join("second");
    let restore = Restore {
        checkpoint,
        patch,
        session: Some(kept.clone()),
    };
    let (outcome, reports) = run_stages_from(
        &machine(&second),
        JOB,
        &task,
        &[],
        &CancellationToken::new(),
        Some(&restore),
        &Pause::default(),
    )
    .await;
    assert!(
        matches!(outcome, TaskOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    let log = read(artifacts(&second).join(task::step_log(1)));
    assert!(log.contains("the session held 2 prompt(s)"), "{log}");
    assert!(restarted(&reports).is_empty());
    let prepare = read(artifacts(&second).join("logs/prepare.log"));
    assert!(
        prepare.contains(&format!("continues the claude session {}", kept.session_id)),
        "{prepare}"
    );
    let now = KeptSession::read(read(artifacts(&second).join(AGENT_SESSION)).as_bytes()).unwrap();
    assert_eq!(now.session_id, kept.session_id);
    assert_eq!(now.content.lines().count(), 3);
}

#[tokio::test]
async fn an_attempt_without_the_job_s_session_begins_one_told_the_history() {
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("go");
    let (task, checkpoint, patch, kept) = first_attempt(tmp.path(), &go).await;
    std::fs::write(&go, "").unwrap();
    let other_runtime = KeptSession {
        runtime: RuntimeMode::Codex,
        path: ".codex/sessions/2026/11/28/rollout-x-abc.jsonl".into(),
        ..kept.clone()
    };
    for (root, session, loss, previous) in [
        ("lost", None, SessionLoss::Lost, None),
        (
            "changed",
            Some(other_runtime),
            SessionLoss::RuntimeChanged,
            Some(kept.session_id.clone()),
        ),
    ] {
        let root = tmp.path().join(root);
        let restore = Restore {
            checkpoint: checkpoint.clone(),
            patch: patch.clone(),
            session,
        };
        let (outcome, reports) = run_stages_from(
            &machine(&root),
            JOB,
            &task,
            &[],
            &CancellationToken::new(),
            Some(&restore),
            &Pause::default(),
        )
        .await;
        assert!(
            matches!(outcome, TaskOutcome::Succeeded { .. }),
            "{outcome:?}"
        );
        let said = restarted(&reports);
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].reason, loss);
        assert_eq!(said[0].previous, previous);
        assert_eq!(said[0].runtime, RuntimeMode::Claude);
        assert_eq!(said[0].step.as_ref().map(|s| s.step_index), Some(1));
        let log = read(artifacts(&root).join(task::step_log(1)));
        assert!(log.contains("the session held 0 prompt(s)"), "{log}");
        let now = KeptSession::read(read(artifacts(&root).join(AGENT_SESSION)).as_bytes()).unwrap();
        assert_ne!(now.session_id, kept.session_id, "a new session");
        let prompt: Value = serde_json::from_str(now.content.lines().next().unwrap()).unwrap();
        let prompt = prompt["prompt"].as_str().unwrap();
        assert!(prompt.starts_with("JOB SO FAR:\n"), "{prompt}");
        assert!(prompt.contains(loss.reason()), "{prompt}");
        assert!(
            prompt.contains("- STEP 1/2 step-1 Write: @fake write notes.txt one @fake history"),
            "{prompt}"
        );
        assert!(
            prompt
                .contains("\nMOONMIND TASK OBJECTIVE:\nGreet the world\n\nSTEP 2/2 step-2 Check:"),
            "{prompt}"
        );
    }
}
