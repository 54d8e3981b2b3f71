use contract::{Defaults, FieldError, NormalizedTask, normalize};
use serde_json::{Value, json};

/// seed 001 §9.3, verbatim.
pub const SEED_EXAMPLE: &str = r#"{
  "type": "task",
  "priority": 0,
  "maxAttempts": 3,
  "payload": {
    "repository": "MoonLadderStudios/MoonMind",
    "targetRuntime": "codex",
    "task": {
      "instructions": "Implement TaskStepsSystem and update tests.",
      "runtime": { "mode": "codex", "model": "gpt-5-codex", "effort": "high" },
      "skill": { "id": "auto", "args": {} },
      "steps": [
        {
          "id": "step-1",
          "title": "Inspect current task/worker architecture",
          "instructions": "Review current TaskArchitecture and identify integration points.",
          "skill": { "id": "auto", "args": {} }
        },
        {
          "id": "step-2",
          "title": "Generate spec using Speckit",
          "skill": { "id": "speckit", "args": {} }
        },
        {
          "id": "step-3",
          "title": "Implement code + tests",
          "instructions": "Implement the code changes and update unit tests.",
          "skill": { "id": "auto", "args": {} }
        }
      ],
      "git": { "startingBranch": null, "newBranch": null },
      "publish": { "mode": "branch", "prBaseBranch": null, "commitMessage": null, "prTitle": null, "prBody": null }
    }
  }
}"#;

pub fn seed() -> Value {
    serde_json::from_str(SEED_EXAMPLE).expect("the seed example is valid JSON")
}

/// The smallest valid request.
pub fn minimal() -> Value {
    json!({ "payload": { "repository": "octo/repo", "task": { "instructions": "Fix the flaky test." } } })
}

/// `base` with the value at a JSON pointer replaced, creating objects on the way.
pub fn with(mut base: Value, pointer: &str, value: Value) -> Value {
    let mut node = &mut base;
    for part in pointer.trim_start_matches('/').split('/') {
        if !node.is_object() {
            *node = json!({});
        }
        node = node
            .as_object_mut()
            .unwrap()
            .entry(part.to_string())
            .or_insert(Value::Null);
    }
    *node = value;
    base
}

/// `minimal()` with `task.<key>` set.
pub fn task_with(key: &str, value: Value) -> Value {
    with(minimal(), &format!("/payload/task/{key}"), value)
}

pub fn ok(raw: &Value) -> NormalizedTask {
    ok_with(raw, &Defaults::default())
}

pub fn ok_with(raw: &Value, defaults: &Defaults) -> NormalizedTask {
    match normalize(raw, defaults) {
        Ok(task) => task,
        Err(errors) => panic!("expected {raw} to be valid, got {errors:#?}"),
    }
}

pub fn errors(raw: &Value) -> Vec<FieldError> {
    match normalize(raw, &Defaults::default()) {
        Ok(task) => panic!("expected {raw} to be rejected, got {task:#?}"),
        Err(errors) => errors,
    }
}

/// The single error of `raw`, as `path: message`.
pub fn error(raw: &Value) -> String {
    let errors = errors(raw);
    assert_eq!(
        errors.len(),
        1,
        "expected exactly one error, got {errors:#?}"
    );
    errors[0].to_string()
}

pub fn paths(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.path.as_str()).collect()
}
