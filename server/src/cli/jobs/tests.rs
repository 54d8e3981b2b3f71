//! The commands' request building and rendering, and the commands themselves against a
//! real server.

use chrono::DateTime;
use clap::Parser;
use contract::{EventLevel, Job, JobEvent, JobState};
use queue::Role;
use serde_json::json;

use super::*;
use crate::testing::server::start;

/// Parses like the `stepwise` binary would, for one command's arguments.
#[derive(Debug, Parser)]
struct Submit {
    #[command(flatten)]
    args: SubmitArgs,
}

#[derive(Debug, Parser)]
struct Jobs {
    #[command(subcommand)]
    command: JobsCommand,
}

fn submit(args: &[&str]) -> Result<SubmitArgs, clap::Error> {
    let argv = ["submit", "--token", "swu_test"].iter().chain(args);
    Submit::try_parse_from(argv).map(|s| s.args)
}

fn job(id: &str, status: JobState, payload: serde_json::Value) -> Job {
    let at = DateTime::from_timestamp_millis(1_771_322_400_123).unwrap();
    Job {
        status,
        required_capabilities: vec!["codex".into(), "git".into()],
        created_by_user_id: Some("operator".into()),
        max_attempts: 3,
        ..Job::queued(id.parse().unwrap(), payload, at)
    }
}

#[test]
fn submit_flags_build_a_request_with_only_what_was_given() {
    let args = submit(&[
        "--repository",
        "octo/hello",
        "--objective",
        "Add a README",
        "--step",
        "Write the README",
        "--step",
        "Link it from the docs",
        "--publish",
        "branch",
    ])
    .unwrap();
    assert_eq!(
        args.task.request(),
        json!({
            "type": "task",
            "payload": {
                "repository": "octo/hello",
                "task": {
                    "instructions": "Add a README",
                    "steps": [
                        { "instructions": "Write the README" },
                        { "instructions": "Link it from the docs" }
                    ],
                    "publish": { "mode": "branch" }
                }
            }
        })
    );
}

#[test]
fn submit_flags_carry_a_completion_check() {
    let args = submit(&[
        "--repository",
        "octo/hello",
        "--objective",
        "Fix the tests",
        "--check",
        "cargo test",
        "--output-pattern",
        "0 failed",
        "--check-timeout",
        "120",
        "--max-iterations",
        "4",
        "--criteria",
        "all tests pass",
    ])
    .unwrap();
    assert_eq!(
        args.task.request()["payload"]["task"]["completion"],
        json!({ "criteria": "all tests pass", "maxIterations": 4, "command": "cargo test",
                "outputPattern": "0 failed", "timeoutSeconds": 120 })
    );
    // A pattern belongs to a check.
    assert!(
        submit(&[
            "--repository",
            "o/h",
            "--objective",
            "x",
            "--output-pattern",
            "ok"
        ])
        .is_err()
    );
}

#[test]
fn submit_flags_carry_runtime_model_effort_and_skill() {
    let args = submit(&[
        "--repository",
        "octo/hello",
        "--objective",
        "x",
        "--runtime",
        "claude",
        "--model",
        "opus",
        "--effort",
        "high",
        "--skill",
        "speckit",
    ])
    .unwrap();
    let request = args.task.request();
    assert_eq!(
        request["payload"]["task"]["runtime"],
        json!({ "mode": "claude", "model": "opus", "effort": "high" })
    );
    assert_eq!(
        request["payload"]["task"]["skill"],
        json!({ "id": "speckit" })
    );
    // No steps is the implicit single step; the request says so as the task form does.
    assert_eq!(request["payload"]["task"]["steps"], json!([]));
    assert!(request["payload"]["task"].get("publish").is_none());
}

#[test]
fn submit_needs_a_file_or_a_repository_with_an_objective_but_not_both() {
    assert!(submit(&[]).is_err(), "nothing to submit");
    assert!(
        submit(&["--repository", "octo/hello"]).is_err(),
        "no objective"
    );
    assert!(submit(&["job.json", "--repository", "o/r", "--objective", "x"]).is_err());
    assert!(submit(&["job.json", "--step", "x"]).is_err());
    let bad_runtime = submit(&[
        "--repository",
        "o/r",
        "--objective",
        "x",
        "--runtime",
        "gpt",
    ])
    .unwrap_err()
    .to_string();
    assert!(bad_runtime.contains("codex"), "{bad_runtime}");
    let from_file = submit(&["-"]).unwrap();
    assert_eq!(from_file.file.as_deref(), Some(std::path::Path::new("-")));
}

#[test]
fn the_token_never_shows_in_debug_output() {
    let args = Submit::try_parse_from(["submit", "-", "--token", "swu_very-secret"])
        .unwrap()
        .args;
    let shown = format!("{args:?}");
    assert!(!shown.contains("swu_very-secret"), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
}

#[test]
fn jobs_list_takes_only_known_statuses() {
    let parsed =
        Jobs::try_parse_from(["jobs", "list", "--status", "dead_letter", "--token", "t"]).unwrap();
    let JobsCommand::List(list) = parsed.command else {
        panic!("expected list");
    };
    assert_eq!(list.status, Some(JobState::DeadLetter));
    let error = Jobs::try_parse_from(["jobs", "list", "--status", "done", "--token", "t"])
        .unwrap_err()
        .to_string();
    assert!(error.contains("succeeded"), "{error}");
}

#[test]
fn a_job_id_argument_that_is_not_one_is_refused_before_any_request() {
    for command in ["show", "cancel", "events"] {
        let error = Jobs::try_parse_from(["jobs", command, "no-such-job", "--token", "t"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("<ID>") && error.contains("`no-such-job` is not a job id"),
            "{command}: {error}"
        );
    }
    let id = "0190a000-0000-7000-8000-000000000000";
    let parsed = Jobs::try_parse_from(["jobs", "show", id, "--token", "t"]).unwrap();
    let JobsCommand::Show(show) = parsed.command else {
        panic!("expected show");
    };
    assert_eq!(show.id.to_string(), id);
}

#[test]
fn the_table_aligns_columns_cuts_long_objectives_and_counts_implicit_steps() {
    let long = "Refactor the whole queue engine so that every transition is a guarded operation\nsecond line";
    let jobs = [
        job(
            "0190a000-0000-7000-8000-000000000001",
            JobState::Queued,
            json!({
                "repository": "octo/hello",
                "task": {
                    "instructions": "Add a README\nwith details",
                    "steps": [{ "id": "step-1" }, { "id": "step-2" }]
                }
            }),
        ),
        job(
            "0190a000-0000-7000-8000-000000000002",
            JobState::DeadLetter,
            json!({
                "repository": "MoonLadderStudios/MoonMind",
                "task": { "instructions": long, "steps": [] }
            }),
        ),
    ];
    let mut jobs = jobs;
    jobs[1].usage = serde_json::from_value(json!({
        "inputTokens": 1210, "outputTokens": 51, "costUsd": 0.75,
    }))
    .unwrap();
    let table = job_table(&jobs);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines,
        [
            "ID                                    STATUS       CREATED (UTC)     REPOSITORY                  STEPS  USAGE                     OBJECTIVE",
            "0190a000-0000-7000-8000-000000000001  queued       2026-02-17 10:00  octo/hello                      2                            Add a README",
            "0190a000-0000-7000-8000-000000000002  dead_letter  2026-02-17 10:00  MoonLadderStudios/MoonMind      1  1.2k in · 51 out · $0.75  Refactor the whole queue engine so that every…",
        ]
    );
}

#[test]
fn the_summary_shows_attempt_worker_cancel_and_error() {
    let mut running = job(
        "0190a000-0000-7000-8000-000000000003",
        JobState::Running,
        json!({
            "repository": "octo/hello",
            "task": {
                "instructions": "Add a README",
                "runtime": { "mode": "codex", "model": "gpt-5.5", "effort": "high" },
                "publish": { "mode": "pr" },
                "steps": [
                    { "id": "step-1", "title": "Write it", "instructions": "Write the README" },
                    { "id": "step-2", "instructions": "Link it\nfrom the docs" }
                ]
            }
        }),
    );
    let at = running.created_at;
    running.attempt = 2;
    running.claimed_by = Some("w1".into());
    running.lease_expires_at = Some(at);
    running.cancel_requested_at = Some(at);
    running.cancel_requested_by_user_id = Some("alice".into());
    running.cancel_reason = Some("wrong repo".into());
    running.error_message = Some("network blip".into());
    let summary = job_summary(&running);
    for expected in [
        "job         0190a000-0000-7000-8000-000000000003",
        "status      running (attempt 2 of 3)",
        "runtime     codex, model gpt-5.5, effort high",
        "publish     pr",
        "claimed by  w1, lease until 2026-02-17 10:00:00 UTC",
        "cancel      requested 2026-02-17 10:00:00 UTC by alice: wrong repo",
        "error       network blip",
        "steps       1. step-1  Write it",
        "            2. step-2  Link it",
    ] {
        assert!(
            summary.lines().any(|l| l == expected),
            "missing `{expected}` in\n{summary}"
        );
    }
    assert!(!summary.contains("result"), "unset fields are left out");
}

#[test]
fn an_event_line_shows_id_time_level_kind_and_message() {
    let event = JobEvent {
        id: 42,
        job_id: "0190a000-0000-7000-8000-000000000001".parse().unwrap(),
        kind: "task.step.started".into(),
        level: EventLevel::Warn,
        message: "step 1\nstarted".into(),
        payload: serde_json::Map::new(),
        created_at: DateTime::from_timestamp_millis(1_771_322_405_000).unwrap(),
    };
    assert_eq!(
        event_line(&event),
        "42  2026-02-17 10:00:05 UTC  warn   task.step.started  step 1\n    started"
    );
}

fn client_args(server: &str, token: &str) -> ClientArgs {
    ClientArgs {
        server: server.to_string(),
        token: token.to_string(),
    }
}

fn output(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[tokio::test]
async fn submit_from_flags_creates_the_job_and_prints_its_page() {
    let server = start().await;
    let token = server
        .token("ops", queue::TokenKind::User, Some(Role::Operator))
        .await;
    let mut args = submit(&[
        "--repository",
        "octo/hello",
        "--objective",
        "Add a README",
        "--step",
        "Write it",
        "--step",
        "Link it",
        "--runtime",
        "claude",
        "--publish",
        "none",
    ])
    .unwrap();
    args.client = client_args(&server.url(), &token);
    let mut out = Vec::new();
    args.run(&mut out).await.unwrap();
    let out = output(out);
    let (jobs, _) = server
        .user(Role::Viewer)
        .await
        .list_jobs(None, None, None, None)
        .await
        .unwrap();
    let job = &jobs[0];
    assert_eq!(
        out,
        format!(
            "submitted {id} (queued)\n{url}/tasks/queue/{id}\n",
            id = job.id,
            url = server.url()
        )
    );
    assert_eq!(job.payload["targetRuntime"], "claude");
    assert_eq!(job.payload["task"]["publish"]["mode"], "none");
    assert_eq!(job.payload["task"]["steps"][1]["instructions"], "Link it");
    assert_eq!(job.required_capabilities, ["claude", "git"]);
}

#[tokio::test]
async fn submit_not_before_schedules_the_job_and_a_bad_time_names_the_field() {
    let server = start().await;
    let token = server
        .token("ops", queue::TokenKind::User, Some(Role::Operator))
        .await;
    let at = (chrono::Utc::now() + chrono::Duration::hours(5))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let flags = [
        "--repository",
        "octo/hello",
        "--objective",
        "Later",
        "--not-before",
    ];
    let mut args = submit(&[&flags[..], &[at.as_str()]].concat()).unwrap();
    args.client = client_args(&server.url(), &token);
    let mut out = Vec::new();
    args.run(&mut out).await.unwrap();
    let out = output(out);
    assert!(
        out.contains(&format!("(queued, to start at {at})")),
        "{out}"
    );
    let (jobs, _) = server
        .user(Role::Viewer)
        .await
        .list_jobs(None, None, None, None)
        .await
        .unwrap();
    assert_eq!(
        jobs[0]
            .next_attempt_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        at
    );

    let mut args = submit(&[&flags[..], &["tomorrow"]].concat()).unwrap();
    args.client = client_args(&server.url(), &token);
    let error = args.run(&mut Vec::new()).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("notBefore: must be a time with its offset"),
        "{error}"
    );
}

#[tokio::test]
async fn submit_of_an_invalid_file_reports_every_field_error_one_per_line() {
    let server = start().await;
    let token = server
        .token("ops", queue::TokenKind::User, Some(Role::Operator))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.json");
    std::fs::write(
        &file,
        r#"{"type": "task", "payload": {"task": {"instructions": "", "publish": {"mode": "later"}}}}"#,
    )
    .unwrap();
    let mut args = submit(&[file.to_str().unwrap()]).unwrap();
    args.client = client_args(&server.url(), &token);
    let error = args.run(&mut Vec::new()).await.unwrap_err();
    let JobsCliError::Client(ClientError::Api { errors, .. }) = &error else {
        panic!("expected the API's field errors, got {error:?}");
    };
    assert!(errors.len() >= 2, "{errors:?}");
    let shown = error.to_string();
    let lines: Vec<&str> = shown.lines().skip(1).collect();
    let expected: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect();
    assert_eq!(lines, expected);

    std::fs::write(&file, "{ not json").unwrap();
    let mut args = submit(&[file.to_str().unwrap()]).unwrap();
    args.client = client_args(&server.url(), &token);
    let error = args.run(&mut Vec::new()).await.unwrap_err();
    assert!(matches!(error, JobsCliError::Json { .. }), "{error:?}");
    assert!(error.to_string().contains("job.json"), "{error}");
}

#[tokio::test]
async fn jobs_list_prints_a_table_and_the_next_cursor() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let token = server
        .token("reader", queue::TokenKind::User, Some(Role::Viewer))
        .await;
    for objective in ["first", "second", "third"] {
        let request = json!({"type": "task", "payload": {"repository": "octo/hello", "task": {"instructions": objective}}});
        operator.create_job(&request).await.unwrap();
    }
    let parsed = Jobs::try_parse_from([
        "jobs",
        "list",
        "--limit",
        "2",
        "--token",
        &token,
        "--server",
        &server.url(),
    ])
    .unwrap();
    let mut out = Vec::new();
    parsed.command.run(&mut out).await.unwrap();
    let out = output(out);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("ID "), "{out}");
    // No step reported usage yet: the column is blank.
    assert!(lines[1].ends_with("  1         third"), "{out}");
    assert!(lines[2].ends_with("  1         second"), "{out}");
    let cursor = lines[3]
        .strip_prefix("next page: --cursor ")
        .unwrap_or_else(|| panic!("no cursor line in {out}"));

    let parsed = Jobs::try_parse_from([
        "jobs",
        "list",
        "--limit",
        "2",
        "--cursor",
        cursor,
        "--json",
        "--token",
        &token,
        "--server",
        &server.url(),
    ])
    .unwrap();
    let mut out = Vec::new();
    parsed.command.run(&mut out).await.unwrap();
    let page: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["payload"]["task"]["instructions"], "first");
    assert_eq!(page["nextCursor"], serde_json::Value::Null);
}

#[tokio::test]
async fn jobs_show_and_cancel_speak_about_the_job_and_a_bad_token_names_the_flag() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let token = server
        .token("ops", queue::TokenKind::User, Some(Role::Operator))
        .await;
    let id = operator
        .create_job(&json!({"type": "task", "payload": {"repository": "octo/hello", "task": {"instructions": "x"}}}))
        .await
        .unwrap()
        .id
        .to_string();
    let url = server.url();
    let run = |argv: Vec<&str>| {
        let parsed = Jobs::try_parse_from(argv);
        async move {
            let mut out = Vec::new();
            parsed
                .unwrap()
                .command
                .run(&mut out)
                .await
                .map(|()| output(out))
        }
    };
    let cancelled = run(vec![
        "jobs", "cancel", &id, "--reason", "typo", "--token", &token, "--server", &url,
    ])
    .await
    .unwrap();
    assert_eq!(cancelled, format!("cancelled {id}\n"));
    let shown = run(vec![
        "jobs", "show", &id, "--token", &token, "--server", &url,
    ])
    .await
    .unwrap();
    assert!(
        shown.contains("status      cancelled (attempt 0 of 3)"),
        "{shown}"
    );
    assert!(shown.contains("by ops: typo"), "{shown}");
    let missing = run(vec![
        "jobs",
        "show",
        "0190a000-0000-7000-8000-000000000000",
        "--token",
        &token,
        "--server",
        &url,
    ])
    .await
    .unwrap_err();
    assert!(missing.to_string().contains("job_not_found"), "{missing}");
    let refused = run(vec![
        "jobs",
        "list",
        "--token",
        "swu_wrong",
        "--server",
        &url,
    ])
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("auth_failed"), "{refused}");
    assert!(refused.contains("--token or STEPWISE_TOKEN"), "{refused}");
    assert!(!refused.contains("swu_wrong"), "{refused}");
}

#[tokio::test]
async fn jobs_events_follow_prints_live_events_and_stops_when_the_job_finishes() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let token = server
        .token("reader", queue::TokenKind::User, Some(Role::Viewer))
        .await;
    let id = operator
        .create_job(&json!({"type": "task", "payload": {"repository": "octo/hello", "task": {"instructions": "x", "publish": {"mode": "none"}}}}))
        .await
        .unwrap()
        .id;
    let job_id = id;
    let id = job_id.to_string();
    let claim = contract::api::ClaimBody {
        capabilities: Some(vec!["codex".into(), "git".into()]),
        ..Default::default()
    };
    worker.claim(&claim).await.unwrap().expect("a job");

    let parsed = Jobs::try_parse_from([
        "jobs",
        "events",
        &id,
        "--follow",
        "--token",
        &token,
        "--server",
        &server.url(),
    ])
    .unwrap();
    let following = tokio::spawn(async move {
        let mut out = Vec::new();
        parsed.command.run(&mut out).await.map(|()| output(out))
    });
    let started = contract::NewEvent {
        kind: "task.step.started".into(),
        message: "step 1".into(),
        ..Default::default()
    };
    worker.append_event(&job_id, 1, &started).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !following.is_finished(),
        "the job still runs: it keeps following"
    );
    worker.complete(&job_id, 1, Some("done")).await.unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), following)
        .await
        .expect("it stops once the job succeeded")
        .unwrap()
        .unwrap();
    let kinds: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    assert_eq!(
        kinds,
        [
            "job.created",
            "job.claimed",
            "task.step.started",
            "job.completed"
        ],
        "{out}"
    );
    assert!(out.ends_with(&format!("job {id} is succeeded\n")), "{out}");

    let parsed = Jobs::try_parse_from([
        "jobs",
        "events",
        &id,
        "--after",
        "1",
        "--json",
        "--token",
        &token,
        "--server",
        &server.url(),
    ])
    .unwrap();
    let mut out = Vec::new();
    parsed.command.run(&mut out).await.unwrap();
    let events: Vec<JobEvent> = output(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().all(|e| e.id > 1));
    assert_eq!(events.last().unwrap().kind, "job.completed");
}

#[tokio::test]
async fn jobs_pause_resume_and_retry_say_where_the_job_will_start() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let token = server
        .token("ops", queue::TokenKind::User, Some(Role::Operator))
        .await;
    let id = operator
        .create_job(&json!({"type": "task", "payload": {"repository": "octo/hello", "task": {"instructions": "x"}}}))
        .await
        .unwrap()
        .id
        .to_string();
    let url = server.url();
    let run = |args: &[&str]| {
        let mut argv: Vec<String> = ["jobs"].iter().chain(args).map(|s| s.to_string()).collect();
        argv.extend([
            "--token".into(),
            token.clone(),
            "--server".into(),
            url.clone(),
        ]);
        async move {
            let parsed = Jobs::try_parse_from(argv).map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            match parsed.command.run(&mut out).await {
                Ok(()) => Ok(output(out)),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let paused = run(&["pause", &id]).await.unwrap();
    assert_eq!(
        paused,
        format!("paused {id}; `stepwise jobs resume {id}` continues it from the start\n")
    );
    let appended = run(&["append", &id, "--step", "and the docs"])
        .await
        .unwrap();
    assert_eq!(
        appended,
        format!("appended 1 step(s) to {id}: 2 in all (paused)\n")
    );
    // `add-step` is its name in the issue's words; `append` stays.
    let added = run(&["add-step", &id, "--step", "and the changelog"])
        .await
        .unwrap();
    assert_eq!(
        added,
        format!("appended 1 step(s) to {id}: 3 in all (paused)\n")
    );
    let unknown = run(&["resume", &id, "--checkpoint", "step-4"])
        .await
        .unwrap_err();
    assert!(unknown.contains("checkpoint"), "{unknown}");
    let resumed = run(&["resume", &id]).await.unwrap();
    assert_eq!(
        resumed,
        format!("resumed {id}: queued to continue from the start\n")
    );
    // A queued job is not retried; and steps are numbered from 1.
    let refused = run(&["retry", &id]).await.unwrap_err();
    assert!(refused.contains("job_state_conflict"), "{refused}");
    assert!(run(&["retry", &id, "--from-step", "0"]).await.is_err());
    run(&["cancel", &id]).await.unwrap();
    let retried = run(&["retry", &id, "--from-step", "1"]).await.unwrap();
    assert_eq!(
        retried,
        format!("retrying {id}: queued for attempt 1, from the start\n")
    );
    // Only a job at the gate is approved or rejected.
    let refused = run(&["approve", &id]).await.unwrap_err();
    assert!(refused.contains("job_state_conflict"), "{refused}");
    let refused = run(&["reject", &id, "--reason", "no"]).await.unwrap_err();
    assert!(
        refused.contains("only a job awaiting approval"),
        "{refused}"
    );
    // A budget is set whole; a price limit where codex reports none is named.
    let set = run(&["budget", &id, "--tokens", "5000", "--minutes", "1.5"])
        .await
        .unwrap();
    assert_eq!(
        set,
        format!("budget of {id} set: 0 of 5,000 tokens · 0 of 1.5 minutes\n")
    );
    let refused = run(&["budget", &id, "--usd", "2"]).await.unwrap_err();
    assert!(
        refused.contains("maxCostUsd") && refused.contains("reports no price"),
        "{refused}"
    );
    let empty = run(&["budget", &id]).await.unwrap_err();
    assert!(empty.contains("at least one"), "{empty}");
    let shown = run(&["show", &id]).await.unwrap();
    assert!(
        shown.contains("budget      0 of 5,000 tokens · 0 of 1.5 minutes"),
        "{shown}"
    );

    // A job under way is not followed up; one that ended is, as its next round.
    let refused = run(&["follow-up", &id, "--step", "more"])
        .await
        .unwrap_err();
    assert!(refused.contains("add the steps to it instead"), "{refused}");
    let claim = queue::ClaimRequest {
        worker_id: "w1".into(),
        capabilities: vec!["codex".into(), "git".into(), "gh".into()],
        allowed_types: None,
        allowed_repositories: None,
        lease: std::time::Duration::from_secs(60),
        max_running_per_repository: None,
    };
    let claimed = server
        .queue()
        .claim(&claim)
        .await
        .unwrap()
        .expect("the job");
    let fence = queue::Fence::of(&claimed).unwrap();
    server
        .queue()
        .complete(&claimed.id, &fence, None)
        .await
        .unwrap();
    let followed = run(&[
        "follow-up",
        &id,
        "--step",
        "and the docs",
        "--step",
        "and the tests",
    ])
    .await
    .unwrap();
    assert_eq!(
        followed,
        format!("round 2 of {id}: queued to run 2 new step(s), nothing kept from before\n")
    );
}
