//! How jobs read on a page, checked without a server.

use super::*;

/// The id of the job these tests show.
const J1: &str = "0190a000-0000-7000-8000-0000000000a1";

#[test]
fn durations_read_at_a_glance() {
    assert_eq!(duration(450), "450ms");
    assert_eq!(duration(12_345), "12.3s");
    assert_eq!(duration(187_000), "3m 07s");
    assert_eq!(duration(3_720_000), "1h 02m");
    assert_eq!(duration(-5), "0ms");
}

#[test]
fn a_title_is_the_objective_s_first_line() {
    assert_eq!(title("\n  Add a README\nthen more"), "Add a README");
    assert_eq!(title(&"x".repeat(130)).chars().count(), 121);
}

#[test]
fn the_timeline_follows_the_step_events_and_links_what_was_uploaded() {
    use serde_json::json;
    let raw = json!({ "payload": { "repository": "octo/hello", "task": {
        "instructions": "Count\nto three",
        "steps": [
            { "title": "One", "instructions": "1" },
            { "instructions": "Second step\nmore" },
            { "skill": { "id": "lint" } },
        ],
    } } });
    let task = contract::normalize(&raw, &contract::Defaults::default());
    let task = task.unwrap_or_else(|e| panic!("{e:?}"));
    let job: Job = serde_json::from_value(json!({
        "id": J1, "type": "task", "status": "running", "priority": 0,
        "payload": task.payload, "requiredCapabilities": [], "attempt": 1,
        "maxAttempts": 3, "nextAttemptAt": "2026-01-01T00:00:00Z",
        "startedAt": "2026-01-01T00:00:00Z",
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    let event = |id: i64, kind: &str, step: usize, at: &str| -> contract::JobEvent {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "kind": kind, "level": "info", "message": "",
            "payload": { "stepIndex": step }, "createdAt": at,
        }))
        .unwrap()
    };
    use contract::job::task;
    let stage = |id: i64, kind: &str, payload: serde_json::Value| -> contract::JobEvent {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "kind": kind, "level": "info", "message": "",
            "payload": payload, "createdAt": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    };
    let events = [
        stage(
            0,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_PREPARE }),
        ),
        stage(
            0,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_PREPARE, "outcome": "succeeded" }),
        ),
        stage(
            0,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_EXECUTE }),
        ),
        event(1, task::STEP_STARTED, 0, "2026-01-01T00:00:01Z"),
        event(2, task::STEP_FINISHED, 0, "2026-01-01T00:00:04Z"),
        event(3, task::STEP_STARTED, 1, "2026-01-01T00:00:05Z"),
    ];
    let artifact: contract::Artifact = serde_json::from_value(json!({
        "id": "a1", "jobId": J1, "name": task::step_log(0), "size": 3,
        "contentType": "text/plain", "sha256": "00", "createdAt": "2026-01-01T00:00:04Z",
    }))
    .unwrap();
    let now = 1_767_225_607_000; // 2026-01-01T00:00:07Z
    let log = |id: i64, step: usize, message: &str| -> contract::JobEvent {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "kind": task::STEP_LOG, "level": "info",
            "message": message, "payload": { "stepIndex": step },
            "createdAt": "2026-01-01T00:00:05Z",
        }))
        .unwrap()
    };
    let latest = [
        log(4, 0, "first step's line"),
        event(5, task::STEP_STARTED, 1, "2026-01-01T00:00:05Z"),
        log(6, 1, "two\nlines"),
        log(7, 1, "three"),
    ];
    let data = JobData {
        job: &job,
        milestones: &events,
        latest: &latest,
        events_total: 40,
        artifacts: std::slice::from_ref(&artifact),
    };
    let view = job_view(data, now, None);
    let steps: Vec<(&str, &str, &str)> = view
        .steps
        .iter()
        .map(|s| (s.title.as_str(), s.state.as_str(), s.duration.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            ("One", "succeeded", "3.0s"),
            ("Second step", "running", "2.0s"),
            ("Step 3", "pending", ""),
        ]
    );
    assert_eq!(
        view.steps[0].log.as_deref(),
        Some(format!("/tasks/queue/{J1}/artifacts/a1").as_str())
    );
    assert_eq!(
        view.artifacts[0].download,
        format!("/api/queue/jobs/{J1}/artifacts/a1/download")
    );
    let tail = view.tail.as_ref().unwrap();
    assert_eq!((tail.step_index, tail.running), (1, true));
    assert_eq!(tail.title, "2. Second step");
    assert_eq!(tail.lines, ["two", "lines", "three"]);
    assert_eq!(view.last_event_id, 7);
    // The events table lists the milestones, to the second; log lines are in the box.
    assert_eq!(view.events.len(), events.len());
    assert!(view.events.iter().all(|e| e.kind != task::STEP_LOG));
    assert_eq!(view.events[3].when, "2026-01-01 00:00:01 UTC");
    assert_eq!(view.events_total, 40);
    assert_eq!(view.steps[1].log, None);
    let stages: Vec<(&str, &str)> = view
        .stages
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        stages,
        [
            ("prepare", "succeeded"),
            ("execute", "running"),
            ("publish", "pending")
        ]
    );
    assert_eq!(view.title, "Count");
}

#[test]
fn a_queued_job_nobody_can_run_says_what_is_missing() {
    use serde_json::json;
    let job: Job = serde_json::from_value(json!({
        "id": J1, "type": "task", "status": "queued", "priority": 0,
        "payload": {}, "requiredCapabilities": ["codex", "git"], "attempt": 0,
        "maxAttempts": 3, "nextAttemptAt": "2026-01-01T00:00:00Z",
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    let now = job.created_at;
    let git_only = queue::WorkerRecord {
        id: "w".into(),
        capabilities: vec!["git".into()],
        version: None,
        sandbox: None,
        first_seen_at: now,
        last_seen_at: now,
        running_jobs: Vec::new(),
    };
    assert!(
        waiting(&job, &[], now)
            .unwrap()
            .starts_with("no worker is connected")
    );
    assert_eq!(
        waiting(&job, std::slice::from_ref(&git_only), now).as_deref(),
        Some("no connected worker has: codex")
    );
    let mut both = git_only.clone();
    both.capabilities.push("codex".into());
    assert_eq!(waiting(&job, std::slice::from_ref(&both), now), None);
    // Scheduled for later: it says when, whoever is connected.
    let mut scheduled = job.clone();
    scheduled.next_attempt_at = now + chrono::Duration::hours(3);
    assert_eq!(
        waiting(&scheduled, &[both], now).as_deref(),
        Some("it is scheduled to start at 2026-01-01 03:00 UTC")
    );
    scheduled.attempt = 1;
    assert_eq!(
        waiting(&scheduled, &[], now).as_deref(),
        Some("its next attempt starts at 2026-01-01 03:00 UTC")
    );
    let mut running = job.clone();
    running.status = contract::JobState::Running;
    assert_eq!(waiting(&running, &[], now), None);
}

#[test]
fn a_step_shows_what_its_latest_run_used_and_the_job_its_total() {
    use contract::job::task;
    use serde_json::json;
    let raw = json!({ "payload": { "repository": "octo/hello", "task": {
        "instructions": "Two steps",
        "steps": [{ "instructions": "1" }, { "instructions": "2" }],
    } } });
    let task = contract::normalize(&raw, &contract::Defaults::default()).unwrap();
    let job: Job = serde_json::from_value(json!({
        "id": J1, "type": "task", "status": "running", "priority": 0,
        "payload": task.payload, "requiredCapabilities": [], "attempt": 2,
        "maxAttempts": 3, "nextAttemptAt": "2026-01-01T00:00:00Z",
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
        "usage": { "inputTokens": 30, "outputTokens": 3, "costUsd": 0.5 },
    }))
    .unwrap();
    let event = |id: i64, kind: &str, payload: serde_json::Value| -> contract::JobEvent {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "kind": kind, "level": "info", "message": "",
            "payload": payload, "createdAt": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    };
    let used = json!({ "inputTokens": 10, "outputTokens": 1, "costUsd": 0.25 });
    let events = [
        event(1, task::STEP_STARTED, json!({ "stepIndex": 0 })),
        event(
            2,
            task::STEP_FINISHED,
            json!({ "stepIndex": 0, "usage": used }),
        ),
        event(3, task::STEP_STARTED, json!({ "stepIndex": 1 })),
        event(
            4,
            task::STEP_FAILED,
            json!({ "stepIndex": 1, "usage": used }),
        ),
        // The second attempt runs the first step again: its last run has not ended yet.
        event(5, task::STEP_STARTED, json!({ "stepIndex": 0 })),
    ];
    let data = JobData {
        job: &job,
        milestones: &events,
        latest: &[],
        events_total: 5,
        artifacts: &[],
    };
    let view = job_view(data, 1_767_225_607_000, None);
    let usage: Vec<&str> = view.steps.iter().map(|s| s.usage.as_str()).collect();
    assert_eq!(usage, ["", "10 in · 1 out · $0.25"]);
    assert_eq!(view.usage, "30 in · 3 out · $0.50");
    assert_eq!(row(&job, 0, None, 0).usage, "30 in · 3 out · $0.50");
}

#[test]
fn a_task_with_a_check_shows_each_iteration_with_its_verdict_and_links() {
    use contract::job::task;
    use serde_json::json;
    let raw = json!({ "payload": { "repository": "octo/hello", "task": {
        "instructions": "Fix the tests",
        "completion": { "command": "cargo test", "maxIterations": 3, "criteria": "green" },
    } } });
    let task = contract::normalize(&raw, &contract::Defaults::default()).unwrap();
    let job: Job = serde_json::from_value(json!({
        "id": J1, "type": "task", "status": "running", "priority": 0,
        "payload": task.payload, "requiredCapabilities": [], "attempt": 1,
        "maxAttempts": 3, "nextAttemptAt": "2026-01-01T00:00:00Z",
        "startedAt": "2026-01-01T00:00:00Z",
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    let event = |id: i64, kind: &str, payload: serde_json::Value, at: &str| -> contract::JobEvent {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "kind": kind, "level": "info", "message": "",
            "payload": payload, "createdAt": at,
        }))
        .unwrap()
    };
    let events = [
        event(
            1,
            task::ITERATION_STARTED,
            json!({ "iteration": 0, "maxIterations": 3 }),
            "2026-01-01T00:00:01Z",
        ),
        event(
            2,
            task::ITERATION_FINISHED,
            json!({ "iteration": 0, "maxIterations": 3,
            "outcome": "succeeded", "check": { "passed": false, "exitCode": 101,
            "outputTail": "test x ... FAILED\n<script>", "durationMs": 900 } }),
            "2026-01-01T00:00:02Z",
        ),
        event(
            3,
            task::ITERATION_STARTED,
            json!({ "iteration": 1, "maxIterations": 3 }),
            "2026-01-01T00:00:03Z",
        ),
        event(
            4,
            task::CHECKPOINT,
            json!({ "afterStep": 0, "baseCommit": "abc",
            "artifact": task::step_checkpoint(0) }),
            "2026-01-01T00:00:00Z",
        ),
    ];
    let artifact: contract::Artifact = serde_json::from_value(json!({
        "id": "c0", "jobId": J1, "name": task::check_log(0), "size": 30,
        "contentType": "text/plain", "sha256": "0", "createdAt": "2026-01-01T00:00:02Z",
    }))
    .unwrap();
    let data = JobData {
        job: &job,
        milestones: &events,
        latest: &events,
        events_total: 4,
        artifacts: std::slice::from_ref(&artifact),
    };
    let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:07Z")
        .unwrap()
        .timestamp_millis();
    let view = job_view(data, now, None);
    let fact = |name: &str| {
        view.facts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        fact("Check"),
        "cargo test (after the steps; the agent runs again while it fails, up to 3 times)"
    );
    assert_eq!(fact("Done when"), "green");
    // The checkpoint is a fact; its patch is among the artifacts.
    assert_eq!(fact("Checkpoints"), "after step 1");
    let [first, second] = &view.iterations[..] else {
        panic!("{:?}", view.iterations)
    };
    assert_eq!(first.title, "Check of the steps' work");
    assert_eq!(first.verdict, "the check failed (exit code 101)");
    assert!(!first.passed);
    assert_eq!(first.duration, "1.0s");
    assert_eq!(first.since, None, "an iteration that ended counts no more");
    assert_eq!(
        first.check_log.as_deref(),
        Some(format!("/tasks/queue/{J1}/artifacts/c0").as_str())
    );
    assert_eq!(second.title, "Iteration 1");
    assert_eq!(second.verdict, "the agent runs again");
    assert_eq!(second.state, StepState::Running);
    assert_eq!(second.duration, "4.0s");
    // The page counts on from its start.
    assert!(second.since.is_some());
}

#[test]
fn an_ended_job_says_what_never_ran_was_skipped_in_plain_stage_names() {
    use contract::job::task;
    use serde_json::json;
    let raw = json!({ "payload": { "repository": "octo/hello", "task": {
        "instructions": "Fix the bug",
        "steps": [{ "instructions": "1" }, { "instructions": "2" }],
    } } });
    let task = contract::normalize(&raw, &contract::Defaults::default()).unwrap();
    let job: Job = serde_json::from_value(json!({
        "id": J1, "type": "task", "status": "cancelled", "priority": 0,
        "payload": task.payload, "requiredCapabilities": [], "attempt": 1,
        "maxAttempts": 3, "nextAttemptAt": "2026-01-01T00:00:00Z",
        "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:09Z",
        "errorMessage": "moonmind.task.execute: cancelled by alice",
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    let event = |id: i64, kind: &str, payload: serde_json::Value| -> contract::JobEvent {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "kind": kind, "level": "info",
            "message": format!("{} started", task::STAGE_PREPARE),
            "payload": payload, "createdAt": "2026-01-01T00:00:01Z",
        }))
        .unwrap()
    };
    let events = [
        event(
            1,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_PREPARE }),
        ),
        event(
            2,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_PREPARE, "outcome": "succeeded" }),
        ),
        event(
            3,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_EXECUTE }),
        ),
        event(4, task::STEP_STARTED, json!({ "stepIndex": 0 })),
        event(5, task::STEP_CANCELLED, json!({ "stepIndex": 0 })),
        event(
            6,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_EXECUTE, "outcome": "cancelled" }),
        ),
    ];
    let artifact = |id: &str, name: &str, size: u64| -> contract::Artifact {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "name": name, "size": size,
            "contentType": "text/plain", "sha256": "00", "createdAt": "2026-01-01T00:00:04Z",
        }))
        .unwrap()
    };
    let artifacts = [
        artifact("a1", &task::step_log(0), 3),
        artifact("a2", &task::step_patch(0), 0),
        artifact("a3", task::CHANGES_PATCH, 0),
    ];
    let data = JobData {
        job: &job,
        milestones: &events,
        latest: &events,
        events_total: 6,
        artifacts: &artifacts,
    };
    let view = job_view(data, 1_767_225_607_000, None);
    let steps: Vec<&str> = view.steps.iter().map(|s| s.state.as_str()).collect();
    assert_eq!(steps, ["cancelled", "skipped"]);
    let stages: Vec<(&str, &str)> = view
        .stages
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        stages,
        [
            ("prepare", "succeeded"),
            ("execute", "cancelled"),
            ("publish", "skipped")
        ]
    );
    let error = view.facts.iter().find(|(name, _)| name == "Error").unwrap();
    assert_eq!(error.1, "execute: cancelled by alice");
    assert_eq!(view.events[0].message, "prepare started");
    // The step's empty patch is not listed; the changes kept for approval are, to say so.
    let listed: Vec<&str> = view.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(listed, [task::step_log(0).as_str(), task::CHANGES_PATCH]);
    // A one-line objective is the heading: it is not said twice.
    assert_eq!(
        (view.title.as_str(), view.objective.as_str()),
        ("Fix the bug", "")
    );
}

#[test]
fn a_step_that_starts_between_the_job_page_reads_is_shown_running() {
    use contract::job::task;
    use serde_json::json;
    let event = |id: i64, kind: &str| -> contract::JobEvent {
        serde_json::from_value(json!({
            "id": id, "jobId": J1, "kind": kind, "level": "info", "message": "",
            "payload": { "stepIndex": 0 }, "createdAt": "2026-01-01T00:00:01Z",
        }))
        .unwrap()
    };
    // The milestones were read before step 1 started; the newest events after it started
    // and said a line. The stream resumes after #5, so #4 must be in the timeline now.
    let mut milestones = vec![event(1, "job.created"), event(2, "job.claimed")];
    let latest = [
        event(2, "job.claimed"),
        event(3, task::STEP_LOG),
        event(4, task::STEP_STARTED),
        event(5, task::STEP_LOG),
    ];
    catch_up_milestones(&mut milestones, &latest);
    let ids: Vec<i64> = milestones.iter().map(|e| e.id).collect();
    assert_eq!(ids, [1, 2, 4]);
    let timeline = Timeline::from_events(1, &milestones);
    assert_eq!(timeline.steps[0].state, StepState::Running);
}
