use chrono::DateTime;
use serde_json::json;

use super::*;
use crate::job::EventLevel;

fn step() -> StepRef {
    StepRef {
        step_index: 1,
        step_id: "tests".into(),
        effective_skill: "auto".into(),
        has_step_instructions: true,
        round: None,
    }
}

fn event(kind: &str, payload: Value) -> JobEvent {
    JobEvent {
        id: 1,
        job_id: uuid::Uuid::nil().into(),
        kind: kind.into(),
        level: EventLevel::Info,
        message: String::new(),
        payload: payload.as_object().cloned().unwrap(),
        created_at: DateTime::UNIX_EPOCH,
    }
}

/// The keys seeds 000 and 001 name, exactly as workers have always sent them.
#[test]
fn payloads_carry_the_seed_keys() {
    let cases: Vec<(Map<String, Value>, Value)> = vec![
        (
            StageStarted {
                stage: task::STAGE_PREPARE.into(),
            }
            .payload(),
            json!({ "stage": "moonmind.task.prepare" }),
        ),
        (
            StageFinished {
                stage: task::STAGE_PUBLISH.into(),
                outcome: Some(StageState::Skipped),
                duration_ms: Some(12),
            }
            .payload(),
            json!({ "stage": "moonmind.task.publish", "outcome": "skipped", "durationMs": 12 }),
        ),
        (
            StepsPlan {
                count: 2,
                step_ids: vec!["a".into(), "b".into()],
            }
            .payload(),
            json!({ "count": 2, "stepIds": ["a", "b"] }),
        ),
        (
            StepStarted { step: step() }.payload(),
            json!({ "stepIndex": 1, "stepId": "tests", "effectiveSkill": "auto",
                    "hasStepInstructions": true }),
        ),
        (
            StepFinished(StepEnd::new(
                step(),
                Some("done".into()),
                &StepUsage {
                    output_tokens: Some(3),
                    ..StepUsage::default()
                },
            ))
            .payload(),
            json!({ "stepIndex": 1, "stepId": "tests", "effectiveSkill": "auto",
                    "hasStepInstructions": true, "summary": "done",
                    "usage": { "outputTokens": 3 } }),
        ),
        (
            StepCancelled {
                step: step(),
                stop_ms: 40,
                killed: false,
                usage: None,
            }
            .payload(),
            json!({ "stepIndex": 1, "stepId": "tests", "effectiveSkill": "auto",
                    "hasStepInstructions": true, "stopMs": 40, "killed": false }),
        ),
        (
            StepLog { step_index: 4 }.payload(),
            json!({ "stepIndex": 4 }),
        ),
        (
            Warning {
                commits: vec!["abc fix".into()],
                ..Warning::default()
            }
            .payload(),
            json!({ "commits": ["abc fix"] }),
        ),
        (
            Warning {
                left_out_lines: Some(9),
                left_out_bytes: Some(90),
                ..Warning::default()
            }
            .payload(),
            json!({ "leftOutLines": 9, "leftOutBytes": 90 }),
        ),
        (
            SessionRestarted {
                step: Some(step()),
                runtime: crate::RuntimeMode::Claude,
                reason: crate::session::SessionLoss::RuntimeChanged,
                previous: Some("s-1".into()),
            }
            .payload(),
            json!({ "stepIndex": 1, "stepId": "tests", "effectiveSkill": "auto",
                    "hasStepInstructions": true, "runtime": "claude",
                    "reason": "runtime_changed", "previous": "s-1" }),
        ),
        (
            SessionRestarted {
                step: None,
                runtime: crate::RuntimeMode::Codex,
                reason: crate::session::SessionLoss::Lost,
                previous: None,
            }
            .payload(),
            json!({ "runtime": "codex", "reason": "lost" }),
        ),
    ];
    for (payload, expected) in cases {
        assert_eq!(Value::Object(payload), expected);
    }
}

#[test]
fn a_step_end_leaves_out_what_was_not_reported() {
    let end = StepFailed(StepEnd::new(step(), None, &StepUsage::default()));
    let payload = end.payload();
    assert!(!payload.contains_key("usage") && !payload.contains_key("summary"));
    let read = StepFailed::read(&event(task::STEP_FAILED, Value::Object(payload))).unwrap();
    assert_eq!(read, end);
}

#[test]
fn reading_takes_only_its_own_kind_and_ignores_unknown_keys() {
    let mut payload = StepStarted { step: step() }.payload();
    payload.insert("addedLater".into(), json!(true));
    let started = event(task::STEP_STARTED, Value::Object(payload));
    assert_eq!(
        StepStarted::read(&started),
        Some(StepStarted { step: step() })
    );
    assert_eq!(StepFinished::read(&started), None);
    assert_eq!(StepIndex::of(&started), Some(1));
}

#[test]
fn a_payload_that_is_not_its_kinds_reads_as_none() {
    let odd = event(
        task::STAGE_FINISHED,
        json!({ "stage": "x", "outcome": "exploded" }),
    );
    assert_eq!(StageFinished::read(&odd), None);
    let old = event(task::STAGE_FINISHED, json!({ "stage": "x" }));
    assert_eq!(StageFinished::read(&old).unwrap().outcome, None);
    assert_eq!(
        StepIndex::of(&event(task::WARNING, json!({ "commits": [] }))),
        None
    );
    assert_eq!(
        StepIndex::of(&event(task::STEP_LOG, json!({ "stepIndex": -1 }))),
        None
    );
}

#[test]
fn a_warning_names_its_step_when_it_has_one() {
    let warning = Warning {
        step: Some(step()),
        ..Warning::default()
    };
    let read = Warning::read(&event(task::WARNING, Value::Object(warning.payload()))).unwrap();
    assert_eq!(read, warning);
    let bare = Warning::read(&event(task::WARNING, json!({ "leftOutLines": 1 }))).unwrap();
    assert_eq!(bare.step, None);
}

fn payload(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("the tests pass objects"),
    }
}

#[test]
fn only_a_step_s_end_counts_and_a_bad_usage_is_refused_by_name() {
    let usage = json!({ "stepIndex": 0, "usage": { "inputTokens": 5, "costUsd": 0.5 } });
    let found = reported_usage(task::STEP_FINISHED, &payload(usage.clone()));
    assert_eq!(found.unwrap().unwrap().input_tokens, Some(5));
    let failed = reported_usage(task::STEP_FAILED, &payload(usage.clone()));
    assert_eq!(failed.unwrap().unwrap().cost_usd, Some(0.5));
    let started = reported_usage(task::STEP_STARTED, &payload(usage));
    assert_eq!(started, Ok(None));
    for none in [json!({}), json!({ "usage": null }), json!({ "usage": {} })] {
        let got = reported_usage(task::STEP_FINISHED, &payload(none));
        assert_eq!(got, Ok(None));
    }
    for (bad, path) in [
        (json!({ "usage": "lots" }), "payload.usage"),
        (json!({ "usage": { "inputTokens": -1 } }), "payload.usage"),
        (json!({ "usage": { "outputTokens": 1.5 } }), "payload.usage"),
        (
            json!({ "usage": { "costUsd": -0.1 } }),
            "payload.usage.costUsd",
        ),
    ] {
        let got = reported_usage(task::STEP_FINISHED, &payload(bad));
        assert_eq!(got.unwrap_err().path, path);
    }
}
