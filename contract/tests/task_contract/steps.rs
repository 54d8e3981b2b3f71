use serde_json::{Value, json};

use crate::common::{error, errors, ok, paths, task_with};

fn steps(steps: Value) -> Value {
    task_with("steps", steps)
}

fn ids(raw: &Value) -> Vec<String> {
    ok(raw)
        .payload
        .task
        .steps
        .into_iter()
        .map(|s| s.id)
        .collect()
}

#[test]
fn step_runtime_override_is_rejected_with_its_path() {
    let raw = steps(
        json!([{ "instructions": "a" }, { "instructions": "b" }, { "instructions": "c", "runtime": { "mode": "claude" } }]),
    );
    assert_eq!(
        error(&raw),
        "task.steps[2].runtime: step-level overrides are not allowed; set runtime on the task, it applies to every step"
    );
}

#[test]
fn every_task_level_field_is_rejected_as_a_step_override() {
    let cases = [
        ("model", "runtime.model"),
        ("effort", "runtime.effort"),
        ("repository", "repository"),
        ("repo", "repository"),
        ("targetRuntime", "runtime"),
        ("git", "git"),
        ("publish", "publish"),
        ("container", "container"),
    ];
    for (field, home) in cases {
        let mut step = json!({ "instructions": "a" });
        step[field] = json!("x");
        let errors = errors(&steps(json!([step])));
        assert_eq!(paths(&errors), [format!("task.steps[0].{field}")]);
        assert_eq!(
            errors[0].message,
            format!(
                "step-level overrides are not allowed; set {home} on the task, it applies to every step"
            )
        );
    }
}

#[test]
fn unknown_step_field_is_rejected() {
    assert_eq!(
        error(&steps(json!([{ "instructions": "a", "prompt": "b" }]))),
        "task.steps[0].prompt: unknown field; a step has only id, title, instructions and skill"
    );
}

#[test]
fn step_that_is_not_an_object_is_rejected() {
    assert_eq!(
        error(&steps(json!(["do a"]))),
        "task.steps[0]: expected a step object with id, title, instructions and skill, got a string"
    );
}

#[test]
fn missing_step_ids_are_generated_from_the_index() {
    let raw = steps(
        json!([{ "instructions": "a" }, { "id": "lint", "instructions": "b" }, { "id": " ", "instructions": "c" }]),
    );
    assert_eq!(ids(&raw), ["step-1", "lint", "step-3"]);
}

#[test]
fn duplicate_step_ids_are_rejected() {
    let raw = steps(
        json!([{ "id": "a", "instructions": "1" }, { "id": "b", "instructions": "2" }, { "id": "a", "instructions": "3" }]),
    );
    assert_eq!(
        error(&raw),
        "task.steps[2].id: duplicate step id `a`: task.steps[0] already uses it; step ids must be unique"
    );
}

#[test]
fn generated_step_id_colliding_with_an_explicit_one_is_rejected() {
    let raw = steps(json!([{ "id": "step-2", "instructions": "1" }, { "instructions": "2" }]));
    assert_eq!(
        error(&raw),
        "task.steps[1].id: this step has no id and its generated id `step-2` is already used by task.steps[0]; \
         give this step an explicit id"
    );
}

#[test]
fn step_ids_must_be_simple_names() {
    for bad in ["-a", "a b", "a/b", "é", &"a".repeat(65)] {
        let errors = errors(&steps(json!([{ "id": bad, "instructions": "x" }])));
        assert_eq!(paths(&errors), ["task.steps[0].id"], "{bad}");
    }
    assert_eq!(
        ids(&steps(
            json!([{ "id": "Build.1_x-y", "instructions": "x" }])
        )),
        ["Build.1_x-y"]
    );
}

#[test]
fn blank_step_is_rejected() {
    let blank = "step is blank: give it instructions or a skill, or remove it";
    for step in [
        json!({}),
        json!({ "title": "Just a title" }),
        json!({ "instructions": "   " }),
        json!({ "id": "s", "skill": { "id": "auto" } }),
        json!({ "instructions": null, "skill": null }),
    ] {
        assert_eq!(
            error(&steps(json!([{ "instructions": "ok" }, step.clone()]))),
            format!("task.steps[1]: {blank}"),
            "{step}"
        );
    }
}

#[test]
fn step_with_only_a_skill_or_only_instructions_is_not_blank() {
    let raw = steps(json!([{ "skill": { "id": "speckit" } }, { "instructions": "continue" }]));
    let task = ok(&raw);
    assert_eq!(task.payload.task.steps.len(), 2);
    assert_eq!(
        task.payload.task.steps[1].instructions.as_deref(),
        Some("continue")
    );
}

#[test]
fn step_title_is_trimmed_single_line_and_short() {
    let raw = steps(json!([{ "title": "  Lint  ", "instructions": "  run clippy \n" }]));
    let step = &ok(&raw).payload.task.steps[0];
    assert_eq!(step.title.as_deref(), Some("Lint"));
    assert_eq!(step.instructions.as_deref(), Some("run clippy"));
    assert_eq!(
        error(&steps(
            json!([{ "title": "two\nlines", "instructions": "x" }])
        )),
        "task.steps[0].title: must be a single line without control characters"
    );
    assert_eq!(
        error(&steps(
            json!([{ "title": "t".repeat(201), "instructions": "x" }])
        )),
        "task.steps[0].title: at most 200 characters (got 201)"
    );
    assert_eq!(
        error(&steps(json!([{ "instructions": "x".repeat(100_001) }]))),
        "task.steps[0].instructions: at most 100000 characters (got 100001)"
    );
}

#[test]
fn at_most_100_steps() {
    let many = |n: usize| {
        steps(Value::Array(
            (0..n)
                .map(|i| json!({ "instructions": format!("do {i}") }))
                .collect(),
        ))
    };
    assert_eq!(ok(&many(100)).payload.task.steps.len(), 100);
    assert_eq!(
        error(&many(101)),
        "task.steps: at most 100 steps (got 101); split the work into several tasks"
    );
}

#[test]
fn empty_or_null_steps_mean_no_steps() {
    for empty in [
        json!([]),
        json!(null),
        json!(""),
        json!("  \n"),
        json!("# Steps\n\n"),
    ] {
        assert_eq!(ok(&steps(empty.clone())).payload.task.steps, [], "{empty}");
    }
}

#[test]
fn steps_with_enabled_container_are_rejected() {
    let raw = task_with("steps", json!([{ "instructions": "a" }]));
    let mut raw = raw;
    raw["payload"]["task"]["container"] = json!({ "enabled": true, "image": "alpine:3" });
    assert_eq!(
        error(&raw),
        "task.steps: container execution does not support steps yet; remove the steps (put the work in \
         task.instructions) or disable the container"
    );
    raw["payload"]["task"]["container"]["enabled"] = json!(false);
    assert_eq!(ok(&raw).payload.task.steps.len(), 1);
    raw["payload"]["task"]["steps"] = json!([]);
    raw["payload"]["task"]["container"]["enabled"] = json!(true);
    assert!(ok(&raw).payload.task.container.enabled);
}

#[test]
fn checklist_string_becomes_steps() {
    let text = "## Steps\n\n- [ ] Research attractions in Bangkok\n* [x] Send the list on WhatsApp\n- [X]   Book tickets  \n";
    let task = ok(&steps(json!(text)));
    let got: Vec<_> = task
        .payload
        .task
        .steps
        .iter()
        .map(|s| {
            (
                s.id.as_str(),
                s.title.as_deref(),
                s.instructions.as_deref(),
                s.skill.is_none(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "step-1",
                None,
                Some("Research attractions in Bangkok"),
                true
            ),
            ("step-2", None, Some("Send the list on WhatsApp"), true),
            ("step-3", None, Some("Book tickets"), true),
        ]
    );
}

#[test]
fn checklist_lines_that_are_not_items_are_errors_naming_the_line() {
    let text = "- [ ] Research\nand also send it\n- [ ]\n- [ ] Done";
    let errors = errors(&steps(json!(text)));
    let shown: Vec<_> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "task.steps: line 2: not a checklist item; write each step as `- [ ] text` (blank lines and # headings are ignored)",
            "task.steps: line 3: the checklist item is empty; write what the step should do, or remove the line",
        ]
    );
}

#[test]
fn step_skill_is_validated_at_its_path() {
    let raw = steps(json!([{ "skill": { "id": "a/b", "requiredCapabilities": ["-bad"] } }]));
    assert_eq!(
        paths(&errors(&raw)),
        [
            "task.steps[0].skill.id",
            "task.steps[0].skill.requiredCapabilities[0]"
        ]
    );
}
