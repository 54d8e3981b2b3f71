//! The fold, read from events as a worker writes them.

use serde_json::{Value, json};

use super::*;
use crate::job::EventLevel;

fn at(second: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_225_600 + second, 0).unwrap()
}

fn event(id: i64, kind: &str, payload: Value, second: i64) -> JobEvent {
    JobEvent {
        id,
        job_id: uuid::Uuid::nil().into(),
        kind: kind.into(),
        level: EventLevel::Info,
        message: String::new(),
        payload: payload.as_object().cloned().unwrap_or_default(),
        created_at: at(second),
    }
}

fn step(id: i64, kind: &str, index: usize, second: i64) -> JobEvent {
    event(id, kind, json!({ "stepIndex": index }), second)
}

fn states(timeline: &Timeline) -> Vec<StepState> {
    timeline.steps.iter().map(|s| s.state).collect()
}

#[test]
fn a_task_without_events_has_every_step_and_stage_pending() {
    let timeline = Timeline::from_events(2, &[]);
    assert_eq!(states(&timeline), [StepState::Pending; 2]);
    assert_eq!(timeline.stages, [StageState::Pending; 3]);
    assert_eq!(timeline.latest_started(), None);
    assert_eq!(timeline.steps[0].duration_ms(0), None);
}

#[test]
fn each_step_event_moves_its_step_and_no_other() {
    let events = [
        step(1, task::STEP_STARTED, 0, 1),
        step(2, task::STEP_FINISHED, 0, 4),
        step(3, task::STEP_STARTED, 1, 5),
        step(4, task::STEP_FAILED, 1, 6),
        step(5, task::STEP_STARTED, 2, 7),
        step(6, task::STEP_CANCELLED, 2, 8),
    ];
    let timeline = Timeline::from_events(4, &events);
    assert_eq!(
        states(&timeline),
        [
            StepState::Succeeded,
            StepState::Failed,
            StepState::Cancelled,
            StepState::Pending
        ]
    );
    assert_eq!(timeline.steps[0].duration_ms(0), Some(3_000));
}

#[test]
fn a_running_step_lasts_until_now() {
    let timeline = Timeline::from_events(1, &[step(1, task::STEP_STARTED, 0, 5)]);
    let now = at(7).timestamp_millis();
    assert_eq!(timeline.steps[0].state, StepState::Running);
    assert_eq!(timeline.steps[0].duration_ms(now), Some(2_000));
}

#[test]
fn a_retried_step_starts_over_and_forgets_its_last_run() {
    let used = json!({ "stepIndex": 0, "usage": { "outputTokens": 5 } });
    let events = [
        step(1, task::STEP_STARTED, 0, 1),
        event(2, task::STEP_FAILED, used, 2),
        step(3, task::STEP_STARTED, 0, 10),
    ];
    let mut timeline = Timeline::from_events(1, &events[..2]);
    assert_eq!(
        timeline.steps[0].usage.and_then(|u| u.output_tokens),
        Some(5)
    );
    timeline.apply(&events[2]);
    let retried = &timeline.steps[0];
    assert_eq!(retried.state, StepState::Running);
    assert_eq!((retried.started_at, retried.ended_at), (Some(at(10)), None));
    assert_eq!(retried.usage, None);
    assert_eq!(retried.duration_ms(at(13).timestamp_millis()), Some(3_000));
}

#[test]
fn an_end_never_seen_starting_has_a_state_but_no_duration() {
    let timeline = Timeline::from_events(1, &[step(1, task::STEP_FINISHED, 0, 3)]);
    assert_eq!(timeline.steps[0].state, StepState::Succeeded);
    assert_eq!(timeline.steps[0].duration_ms(0), None);
}

#[test]
fn a_usage_the_queue_would_refuse_is_not_shown() {
    let refused = json!({ "stepIndex": 0, "usage": { "costUsd": -1.0 } });
    let timeline = Timeline::from_events(1, &[event(1, task::STEP_FINISHED, refused, 1)]);
    assert_eq!(timeline.steps[0].state, StepState::Succeeded);
    assert_eq!(timeline.steps[0].usage, None);
}

#[test]
fn events_for_steps_the_task_lacks_or_of_other_kinds_change_nothing() {
    let events = [
        step(1, task::STEP_STARTED, 5, 1),
        event(2, task::STEP_STARTED, json!({ "stepIndex": "0" }), 1),
        event(3, task::STEP_STARTED, json!({}), 1),
        step(4, task::STEP_LOG, 0, 1),
        step(5, task::WARNING, 0, 1),
        event(6, task::STEPS_PLAN, json!({ "count": 1 }), 1),
    ];
    let timeline = Timeline::from_events(1, &events);
    assert_eq!(timeline, Timeline::from_events(1, &[]));
}

#[test]
fn stages_follow_their_start_and_the_outcome_of_their_end() {
    let stage = |id, kind, payload| event(id, kind, payload, 1);
    let events = [
        stage(
            1,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_PREPARE }),
        ),
        stage(
            2,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_PREPARE, "outcome": "succeeded" }),
        ),
        stage(
            3,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_EXECUTE }),
        ),
        stage(
            4,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_EXECUTE, "outcome": "cancelled" }),
        ),
        stage(
            5,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_PUBLISH, "outcome": "skipped" }),
        ),
    ];
    let timeline = Timeline::from_events(0, &events);
    let stages: Vec<_> = timeline.stages().collect();
    assert_eq!(
        stages,
        [
            (task::STAGE_PREPARE, StageState::Succeeded),
            (task::STAGE_EXECUTE, StageState::Cancelled),
            (task::STAGE_PUBLISH, StageState::Skipped),
        ]
    );
}

#[test]
fn a_stage_end_without_an_outcome_succeeded_and_an_unknown_one_is_ignored() {
    let stage = |id, kind, payload| event(id, kind, payload, 1);
    let events = [
        stage(
            1,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_PREPARE }),
        ),
        stage(
            2,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_PREPARE }),
        ),
        stage(
            3,
            task::STAGE_STARTED,
            json!({ "stage": task::STAGE_EXECUTE }),
        ),
        stage(
            4,
            task::STAGE_FINISHED,
            json!({ "stage": task::STAGE_EXECUTE, "outcome": "exploded" }),
        ),
        stage(
            5,
            task::STAGE_STARTED,
            json!({ "stage": "moonmind.task.unknown" }),
        ),
    ];
    let timeline = Timeline::from_events(0, &events);
    assert_eq!(
        timeline.stages,
        [
            StageState::Succeeded,
            StageState::Running,
            StageState::Pending
        ]
    );
}

#[test]
fn the_latest_started_step_is_the_one_whose_output_matters() {
    let events = [
        step(1, task::STEP_STARTED, 0, 1),
        step(2, task::STEP_FINISHED, 0, 2),
        step(3, task::STEP_STARTED, 1, 3),
        step(4, task::STEP_FINISHED, 1, 4),
        // A retry runs the first step again: it is the latest now.
        step(5, task::STEP_STARTED, 0, 5),
    ];
    assert_eq!(
        Timeline::from_events(2, &events[..4]).latest_started(),
        Some(1)
    );
    assert_eq!(Timeline::from_events(2, &events).latest_started(), Some(0));
    let same_time = [
        step(1, task::STEP_STARTED, 0, 1),
        step(2, task::STEP_STARTED, 1, 1),
    ];
    assert_eq!(
        Timeline::from_events(2, &same_time).latest_started(),
        Some(1)
    );
}

#[test]
fn states_travel_as_their_names() {
    for (i, state) in StepState::ALL.into_iter().enumerate() {
        assert_eq!(state.as_str(), StepState::NAMES[i]);
        assert_eq!(serde_json::to_value(state).unwrap(), json!(state.as_str()));
        assert_eq!(
            serde_json::from_value::<StepState>(json!(state.as_str())).unwrap(),
            state
        );
    }
    for (i, state) in StageState::ALL.into_iter().enumerate() {
        assert_eq!(state.as_str(), StageState::NAMES[i]);
        assert_eq!(serde_json::to_value(state).unwrap(), json!(state.as_str()));
        assert_eq!(
            serde_json::from_value::<StageState>(json!(state.as_str())).unwrap(),
            state
        );
    }
    assert!(serde_json::from_value::<StepState>(json!("Running")).is_err());
    let timeline = Timeline::from_events(1, &[step(1, task::STEP_STARTED, 0, 1)]);
    let back: Timeline = serde_json::from_value(serde_json::to_value(&timeline).unwrap()).unwrap();
    assert_eq!(back, timeline);
}

#[test]
fn the_completion_loop_folds_into_its_iterations_with_each_checks_result() {
    let check = |passed: bool| {
        json!({ "passed": passed, "exitCode": if passed { 0 } else { 1 },
        "outputTail": "3 failed", "durationMs": 40 })
    };
    let events = [
        event(
            1,
            task::ITERATION_STARTED,
            json!({ "iteration": 0, "maxIterations": 3 }),
            1,
        ),
        event(
            2,
            task::ITERATION_FINISHED,
            json!({ "iteration": 0, "maxIterations": 3,
            "outcome": "succeeded", "check": check(false) }),
            2,
        ),
        event(
            3,
            task::ITERATION_STARTED,
            json!({ "iteration": 1, "maxIterations": 3 }),
            3,
        ),
        event(
            4,
            task::ITERATION_FINISHED,
            json!({ "iteration": 1, "maxIterations": 3,
            "outcome": "succeeded", "check": check(true),
            "usage": { "inputTokens": 10, "outputTokens": 2 } }),
            5,
        ),
        // Another kind's payload, or an iteration's without its fields, changes nothing.
        event(
            5,
            task::ITERATION_FINISHED,
            json!({ "iteration": "two" }),
            6,
        ),
    ];
    let timeline = Timeline::from_events(1, &events);
    assert_eq!(timeline.iterations.len(), 2);
    let first = &timeline.iterations[0];
    assert_eq!(first.state, StepState::Succeeded);
    assert!(!first.check.as_ref().unwrap().passed);
    assert_eq!(first.usage, None);
    let last = timeline.latest_iteration().unwrap();
    assert_eq!((last.iteration, last.max_iterations), (1, 3));
    assert!(last.check.as_ref().unwrap().passed);
    assert_eq!(last.usage.unwrap().input_tokens, Some(10));
    assert_eq!(last.started_at, Some(at(3)));
    assert_eq!(last.ended_at, Some(at(5)));
    // The steps are untouched.
    assert_eq!(states(&timeline), [StepState::Pending]);
}

#[test]
fn checkpoints_are_listed_oldest_first_and_a_step_saved_again_counts_once() {
    let saved = |id: i64, payload: Value, second: i64| event(id, task::CHECKPOINT, payload, second);
    let events = [
        saved(
            1,
            json!({ "afterStep": 0, "baseCommit": "abc", "artifact": task::step_checkpoint(0) }),
            1,
        ),
        saved(
            2,
            json!({ "afterStep": 1, "baseCommit": "abc", "artifact": task::step_checkpoint(1) }),
            2,
        ),
        saved(
            3,
            json!({ "afterIteration": 1, "baseCommit": "abc",
            "artifact": task::iteration_checkpoint(1) }),
            3,
        ),
        // A retry ran the first step again.
        saved(
            4,
            json!({ "afterStep": 0, "baseCommit": "abc", "artifact": task::step_checkpoint(0) }),
            4,
        ),
        // Not a checkpoint's payload: ignored.
        saved(5, json!({ "afterStep": "one" }), 5),
    ];
    let timeline = Timeline::from_events(2, &events);
    let ids: Vec<&str> = timeline.checkpoints.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["step-2", "iteration-1", "step-1"]);
    let first = &timeline.checkpoints[2];
    assert_eq!(first.label, "after step 1");
    assert_eq!(first.saved.artifact, "checkpoints/step-0000.patch");
    assert_eq!(first.created_at, at(4));
    assert_eq!(timeline.checkpoints[1].label, "after iteration 1");
}

#[test]
fn a_new_attempt_starts_the_loop_and_its_checkpoints_over() {
    let events = [
        event(
            1,
            task::ITERATION_STARTED,
            json!({ "iteration": 0, "maxIterations": 3 }),
            1,
        ),
        event(
            2,
            task::CHECKPOINT,
            json!({ "afterIteration": 1, "baseCommit": "a",
            "artifact": task::iteration_checkpoint(1) }),
            2,
        ),
        // The lease was lost and another worker claimed the job: attempt 2.
        event(
            3,
            crate::job::events::JOB_CLAIMED,
            json!({ "attempt": 2 }),
            3,
        ),
        event(
            4,
            task::CHECKPOINT,
            json!({ "afterStep": 0, "baseCommit": "b",
            "artifact": task::step_checkpoint(0) }),
            4,
        ),
    ];
    let timeline = Timeline::from_events(1, &events);
    assert!(timeline.iterations.is_empty(), "{:?}", timeline.iterations);
    let ids: Vec<&str> = timeline.checkpoints.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["step-1"]);
}

#[test]
fn an_attempt_resumed_from_a_checkpoint_keeps_what_came_before_it() {
    let saved = |index: usize| json!({ "afterStep": index, "baseCommit": "b", "artifact": task::step_checkpoint(index) });
    let events = [
        event(
            1,
            crate::job::events::JOB_CLAIMED,
            json!({ "workerId": "w1", "attempt": 1 }),
            1,
        ),
        step(2, task::STEP_STARTED, 0, 2),
        step(3, task::STEP_FINISHED, 0, 3),
        event(4, task::CHECKPOINT, saved(0), 4),
        step(5, task::STEP_STARTED, 1, 5),
        step(6, task::STEP_FINISHED, 1, 6),
        event(7, task::CHECKPOINT, saved(1), 7),
        step(8, task::STEP_STARTED, 2, 8),
        step(9, task::STEP_FAILED, 2, 9),
        // An operator retries from step 2: the checkpoint after step 1 is restored.
        event(
            10,
            crate::job::events::JOB_RETRY_REQUESTED,
            json!({ "requestedBy": "bob", "fromStepIndex": 1, "resumeFrom": saved(0) }),
            10,
        ),
        event(
            11,
            crate::job::events::JOB_CLAIMED,
            json!({ "workerId": "w2", "attempt": 2 }),
            11,
        ),
    ];
    let timeline = Timeline::from_events(3, &events);
    assert_eq!(
        states(&timeline),
        [StepState::Succeeded, StepState::Pending, StepState::Pending]
    );
    let ids: Vec<&str> = timeline.checkpoints.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["step-1"]);
    let attempts: Vec<(u32, Option<&str>, Option<&str>)> = timeline
        .attempts
        .iter()
        .map(|a| (a.attempt, a.worker_id.as_deref(), a.resumed_from.as_deref()))
        .collect();
    assert_eq!(
        attempts,
        [(1, Some("w1"), None), (2, Some("w2"), Some("after step 1"))]
    );
    assert_eq!(timeline.stages, [StageState::Pending; 3]);
}

#[test]
fn a_fresh_attempt_starts_every_step_over() {
    let events = [
        step(1, task::STEP_STARTED, 0, 1),
        step(2, task::STEP_FAILED, 0, 2),
        event(
            3,
            crate::job::events::JOB_CLAIMED,
            json!({ "attempt": 2 }),
            3,
        ),
    ];
    let timeline = Timeline::from_events(2, &events);
    assert_eq!(states(&timeline), [StepState::Pending, StepState::Pending]);
    assert_eq!(timeline.attempts[0].resumed_from, None);
}
