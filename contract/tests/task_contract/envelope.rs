use contract::JobType;
use serde_json::json;

use crate::common::{error, errors, minimal, ok, paths, with};

#[test]
fn envelope_fields_get_their_defaults() {
    let task = ok(&minimal());
    assert_eq!(task.job_type, JobType::Task);
    assert_eq!(task.priority, 0);
    assert_eq!(task.max_attempts, 3);
    assert_eq!(task.affinity_key, None);
}

#[test]
fn job_type_other_than_task_is_unsupported() {
    assert_eq!(
        ok(&with(minimal(), "/type", json!("task"))).job_type,
        JobType::Task
    );
    assert_eq!(
        error(&with(minimal(), "/type", json!("cron"))),
        "type: unsupported job type `cron`; only \"task\" is accepted"
    );
    assert_eq!(
        error(&with(minimal(), "/type", json!(1))),
        "type: expected a string, got a number"
    );
}

#[test]
fn priority_is_an_integer_within_range() {
    assert_eq!(
        ok(&with(minimal(), "/priority", json!(-1000))).priority,
        -1000
    );
    assert_eq!(
        ok(&with(minimal(), "/priority", json!(1000))).priority,
        1000
    );
    assert_eq!(
        error(&with(minimal(), "/priority", json!(1001))),
        "priority: must be between -1000 and 1000"
    );
    assert_eq!(
        error(&with(minimal(), "/priority", json!(u64::MAX))),
        "priority: must be between -1000 and 1000"
    );
    assert_eq!(
        error(&with(minimal(), "/priority", json!(1.5))),
        "priority: expected an integer, got a number"
    );
    assert_eq!(
        error(&with(minimal(), "/priority", json!("5"))),
        "priority: expected an integer, got a string"
    );
}

#[test]
fn max_attempts_is_between_one_and_ten() {
    assert_eq!(
        ok(&with(minimal(), "/maxAttempts", json!(10))).max_attempts,
        10
    );
    assert_eq!(
        ok(&with(minimal(), "/maxAttempts", json!(null))).max_attempts,
        3
    );
    for bad in [json!(0), json!(11), json!(-1)] {
        assert_eq!(
            error(&with(minimal(), "/maxAttempts", bad)),
            "maxAttempts: must be between 1 and 10"
        );
    }
}

#[test]
fn affinity_key_is_an_optional_non_blank_short_string() {
    assert_eq!(
        ok(&with(minimal(), "/affinityKey", json!(" repo-a ")))
            .affinity_key
            .as_deref(),
        Some("repo-a")
    );
    assert_eq!(
        error(&with(minimal(), "/affinityKey", json!("  "))),
        "affinityKey: must not be blank; leave it out (or null) when the job has no affinity"
    );
    assert_eq!(
        error(&with(minimal(), "/affinityKey", json!("k".repeat(201)))),
        "affinityKey: at most 200 characters (got 201)"
    );
}

#[test]
fn payload_is_required_and_must_be_an_object() {
    assert_eq!(
        error(&json!({ "type": "task" })),
        "payload: required: the task to run (repository and task)"
    );
    assert_eq!(
        error(&json!({ "payload": [] })),
        "payload: expected an object, got an array"
    );
}

#[test]
fn a_document_that_is_not_an_object_is_rejected() {
    for raw in [json!(null), json!([]), json!("task"), json!(3)] {
        assert_eq!(
            error(&raw),
            "expected a JSON object with the fields type, priority, maxAttempts, affinityKey, notBefore, dependsOn, payload"
        );
    }
}

#[test]
fn unknown_envelope_field_is_rejected_listing_the_accepted_ones() {
    let errors = errors(&with(minimal(), "/priorty", json!(1)));
    assert_eq!(paths(&errors), ["priorty"]);
    assert_eq!(
        errors[0].message,
        "unknown field; the accepted fields are type, priority, maxAttempts, affinityKey, notBefore, dependsOn, payload"
    );
}

#[test]
fn every_error_is_reported_not_only_the_first() {
    let raw = json!({
        "type": "cron",
        "priority": 5000,
        "maxAttempts": 0,
        "payload": {
            "repository": "not a repo",
            "targetRuntime": "cursor",
            "task": {
                "instructions": " ",
                "skill": { "id": "../etc" },
                "git": { "newBranch": "a..b" },
                "publish": { "mode": "later" },
                "steps": [
                    { "id": "a", "runtime": "claude", "instructions": "one" },
                    { "id": "a", "instructions": "two" },
                    { "title": "nothing to do" }
                ]
            }
        }
    });
    let errors = errors(&raw);
    assert_eq!(
        paths(&errors),
        [
            "type",
            "priority",
            "maxAttempts",
            "repository",
            "targetRuntime",
            "task.instructions",
            "task.skill.id",
            "task.git.newBranch",
            "task.publish.mode",
            "task.steps[0].runtime",
            "task.steps[1].id",
            "task.steps[2]",
        ]
    );
}

#[test]
fn field_error_displays_as_path_colon_message() {
    let e = contract::FieldError::new("task.steps[2].runtime", "nope");
    assert_eq!(e.to_string(), "task.steps[2].runtime: nope");
    assert_eq!(
        contract::FieldError::new("", "whole document").to_string(),
        "whole document"
    );
}
