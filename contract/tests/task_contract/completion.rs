use contract::Completion;
use serde_json::json;

use crate::common::{errors, minimal, ok, paths, task_with};

#[test]
fn completion_criteria_are_kept_trimmed_with_ten_iterations_unless_told() {
    let task = ok(&task_with(
        "completion",
        json!({ "criteria": "  all tests pass  " }),
    ));
    assert_eq!(
        task.payload.task.completion,
        Some(Completion {
            criteria: Some("all tests pass".into()),
            max_iterations: 10,
        })
    );
    let task = ok(&task_with("completion", json!({ "maxIterations": 200 })));
    assert_eq!(task.payload.task.completion.unwrap().max_iterations, 200);
}

#[test]
fn a_task_without_completion_writes_no_completion() {
    for raw in [minimal(), task_with("completion", json!(null))] {
        let task = ok(&raw);
        assert_eq!(task.payload.task.completion, None);
        let written = serde_json::to_value(&task.payload).unwrap();
        assert!(written["task"].get("completion").is_none(), "{written}");
    }
}

#[test]
fn out_of_range_iterations_unknown_fields_and_checks_by_command_are_refused_by_path() {
    let raw = task_with(
        "completion",
        json!({ "maxIterations": 0, "command": "make test", "why": 1, "criteria": 3 }),
    );
    let errors = errors(&raw);
    let mut got = paths(&errors);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "task.completion.command",
            "task.completion.criteria",
            "task.completion.maxIterations",
            "task.completion.why",
        ],
        "{errors:?}"
    );
    let command = errors
        .iter()
        .find(|e| e.path == "task.completion.command")
        .unwrap();
    assert!(
        command.message.starts_with("not supported yet"),
        "{command:?}"
    );
    assert_eq!(
        paths(&crate::common::errors(&task_with(
            "completion",
            json!({ "maxIterations": 201 })
        ))),
        ["task.completion.maxIterations"]
    );
    assert_eq!(
        paths(&crate::common::errors(&task_with(
            "completion",
            json!("done")
        ))),
        ["task.completion"]
    );
}
