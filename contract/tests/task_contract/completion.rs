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
            command: None,
            output_pattern: None,
            timeout_seconds: None,
        })
    );
    let task = ok(&task_with(
        "completion",
        json!({ "maxIterations": 200, "command": "make check" }),
    ));
    assert_eq!(task.payload.task.completion.unwrap().max_iterations, 200);
    // Without a check nothing runs again, so a limit alone is refused, not kept to no use.
    let errors = errors(&task_with("completion", json!({ "maxIterations": 4 })));
    assert_eq!(
        paths(&errors),
        ["task.completion.maxIterations"],
        "{errors:?}"
    );
    assert!(
        errors[0].message.contains("task.completion.command"),
        "{errors:?}"
    );
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
fn a_check_by_command_is_kept_with_its_pattern_and_timeout() {
    let task = ok(&task_with(
        "completion",
        json!({ "command": " cargo test ", "outputPattern": "test result: ok",
                "timeoutSeconds": 120, "maxIterations": 3 }),
    ));
    let completion = task.payload.task.completion.unwrap();
    assert_eq!(completion.check(), Some("cargo test"));
    assert_eq!(
        completion.output_pattern.as_deref(),
        Some("test result: ok")
    );
    assert_eq!(completion.timeout(), std::time::Duration::from_secs(120));
    assert_eq!(completion.max_iterations, 3);
    // Without a timeout, the default one.
    let task = ok(&task_with("completion", json!({ "command": "make check" })));
    let completion = task.payload.task.completion.unwrap();
    assert_eq!(completion.timeout(), std::time::Duration::from_secs(600));
    let written = serde_json::to_value(&completion).unwrap();
    assert_eq!(
        written,
        json!({ "criteria": null, "maxIterations": 10, "command": "make check" })
    );
}

#[test]
fn out_of_range_numbers_unknown_fields_and_a_pattern_without_a_command_are_refused_by_path() {
    let raw = task_with(
        "completion",
        json!({ "maxIterations": 0, "outputPattern": "ok", "timeoutSeconds": 5, "why": 1, "criteria": 3 }),
    );
    let errors = errors(&raw);
    let mut got = paths(&errors);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "task.completion.criteria",
            "task.completion.maxIterations",
            "task.completion.outputPattern",
            "task.completion.timeoutSeconds",
            "task.completion.why",
        ],
        "{errors:?}"
    );
    let pattern = errors
        .iter()
        .find(|e| e.path == "task.completion.outputPattern")
        .unwrap();
    assert!(
        pattern.message.contains("task.completion.command"),
        "{pattern:?}"
    );
    for bad in [
        json!({ "command": "true", "maxIterations": 201 }),
        json!({ "command": "true", "timeoutSeconds": 0 }),
        json!({ "command": "true", "timeoutSeconds": 3601 }),
        json!({ "command": "x".repeat(4001) }),
        json!({ "command": 7 }),
    ] {
        let errors = crate::common::errors(&task_with("completion", bad.clone()));
        assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
        assert!(
            errors[0].path.starts_with("task.completion."),
            "{bad}: {errors:?}"
        );
    }
    assert_eq!(
        paths(&crate::common::errors(&task_with(
            "completion",
            json!("done")
        ))),
        ["task.completion"]
    );
}

/// Where the regex engine is built in (the queue turns it on, and a workspace build shares
/// it), a pattern that does not compile is refused, naming why.
#[cfg(feature = "patterns")]
#[test]
fn an_output_pattern_that_is_not_a_regular_expression_is_refused() {
    let errors = crate::common::errors(&task_with(
        "completion",
        json!({ "command": "make test", "outputPattern": "passed (" }),
    ));
    assert_eq!(paths(&errors), ["task.completion.outputPattern"]);
    assert!(
        errors[0]
            .message
            .starts_with("not a valid regular expression"),
        "{errors:?}"
    );
}

#[test]
fn an_iterations_prompt_holds_the_objective_the_criteria_the_check_and_its_output() {
    let task = ok(&task_with(
        "completion",
        json!({ "command": "cargo test", "outputPattern": "0 failed", "criteria": "all tests pass",
                "maxIterations": 4 }),
    ));
    let completion = task.payload.task.completion.clone().unwrap();
    let prompt = contract::iteration_prompt(&task, &completion, 2, "test a ... FAILED\n1 failed");
    let objective = &task.payload.task.instructions;
    let expected = format!(
        "MOONMIND TASK OBJECTIVE:\n{objective}\n\n\
         COMPLETION ITERATION 2/4:\n\
         The task's steps have run, but its completion check does not pass yet. Change the repository so that it passes; do not change the check.\n\
         Completion criteria: all tests pass\n\
         Check command (run in the repository): cargo test\n\
         Its output must also match: 0 failed\n\n\
         LAST CHECK OUTPUT (the end of it):\n\
         test a ... FAILED\n1 failed\n\n\
         WORKSPACE:\n\
         - Repo is checked out and on the effective working branch already.\n\
         - Do NOT commit or push. Publish is handled by MoonMind publish stage.\n\
         - Skills are available under: .agents/skills/ and .gemini/skills/ (symlinks to job skills workspace).\n\
         - Write logs to stdout/stderr; MoonMind captures them."
    );
    assert_eq!(prompt, expected);
}

#[test]
fn an_approval_gate_is_kept_when_required_and_named_when_misspelt() {
    let task = ok(&task_with(
        "publish",
        json!({ "mode": "pr", "approval": "required" }),
    ));
    assert!(task.payload.task.publish.approval_required);
    let written = serde_json::to_value(&task.payload).unwrap();
    assert_eq!(written["task"]["publish"]["approval"], "required");
    // Read back as stored, it is still required.
    let again = ok(&json!({ "payload": written }));
    assert!(again.payload.task.publish.approval_required);
    for raw in [
        minimal(),
        task_with("publish", json!({ "approval": "none" })),
    ] {
        let task = ok(&raw);
        assert!(!task.payload.task.publish.approval_required);
        let written = serde_json::to_value(&task.payload).unwrap();
        assert!(
            written["task"]["publish"].get("approval").is_none(),
            "{written}"
        );
    }
    let refused = errors(&task_with("publish", json!({ "approval": "maybe" })));
    assert_eq!(paths(&refused), ["task.publish.approval"]);
    assert!(refused[0].message.contains("required"), "{refused:?}");
}

#[test]
fn a_server_that_requires_approval_stores_it_on_tasks_that_do_not_say() {
    let defaults = contract::Defaults {
        approval_required: true,
        ..contract::Defaults::default()
    };
    let task = crate::common::ok_with(&minimal(), &defaults);
    assert!(task.payload.task.publish.approval_required);
    let written = serde_json::to_value(&task.payload).unwrap();
    assert_eq!(written["task"]["publish"]["approval"], "required");
    let opted_out = crate::common::ok_with(
        &task_with("publish", json!({ "approval": "none" })),
        &defaults,
    );
    assert!(!opted_out.payload.task.publish.approval_required);
}

#[test]
fn pull_request_feedback_is_on_when_given_and_named_where_it_cannot_be() {
    let task = ok(&task_with(
        "publish",
        json!({ "mode": "pr", "feedback": { "reviews": false } }),
    ));
    let feedback = task.payload.task.publish.feedback.expect("on");
    assert_eq!(
        (feedback.ci, feedback.reviews, feedback.max_rounds),
        (true, false, 3)
    );
    let written = serde_json::to_value(&task.payload).unwrap();
    assert_eq!(
        written["task"]["publish"]["feedback"],
        json!({ "ci": true, "reviews": false, "maxRounds": 3 })
    );
    let again = ok(&json!({ "payload": written }));
    assert_eq!(again.payload.task.publish.feedback, Some(feedback));
    for raw in [
        minimal(),
        task_with("publish", json!({ "mode": "pr", "feedback": null })),
    ] {
        let task = ok(&raw);
        assert_eq!(task.payload.task.publish.feedback, None);
        let written = serde_json::to_value(&task.payload).unwrap();
        assert!(written["task"]["publish"].get("feedback").is_none());
    }
    for (feedback, mode, path, says) in [
        (
            json!({}),
            "branch",
            "task.publish.feedback",
            "set task.publish.mode to pr",
        ),
        (
            json!({ "ci": false, "reviews": false }),
            "pr",
            "task.publish.feedback",
            "watches nothing",
        ),
        (
            json!({ "maxRounds": 0 }),
            "pr",
            "task.publish.feedback.maxRounds",
            "between 1 and 20",
        ),
        (
            json!({ "ci": "yes" }),
            "pr",
            "task.publish.feedback.ci",
            "true or false",
        ),
        (
            json!({ "loops": 2 }),
            "pr",
            "task.publish.feedback.loops",
            "",
        ),
        (json!(true), "pr", "task.publish.feedback", ""),
    ] {
        let refused = errors(&task_with(
            "publish",
            json!({ "mode": mode, "feedback": feedback }),
        ));
        assert_eq!(paths(&refused), [path], "{feedback}: {refused:?}");
        assert!(refused[0].message.contains(says), "{refused:?}");
    }
}
