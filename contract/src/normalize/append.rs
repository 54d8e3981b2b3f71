//! Steps appended to a job that exists: checked by the same rules as at submit, by
//! normalizing the whole task again with them added, so ids, limits and skills agree.

use serde_json::{Value, json};

use crate::checklist::parse_checklist;
use crate::defaults::Defaults;
use crate::error::FieldError;
use crate::model::NormalizedTask;

/// The job's task (its stored, normalized `payload`) with `added` after its steps: an
/// array of step objects or a markdown checklist. Errors name `steps[i]…` of `added`.
pub fn append_steps(
    payload: &Value,
    added: &Value,
    defaults: &Defaults,
) -> Result<NormalizedTask, Vec<FieldError>> {
    let new: Vec<Value> = match added {
        Value::Array(items) if !items.is_empty() => items.clone(),
        Value::String(text) => match parse_checklist(text) {
            Ok(items) if !items.is_empty() => items
                .into_iter()
                .map(|item| json!({ "instructions": item.text }))
                .collect(),
            Ok(_) => return Err(vec![FieldError::new("steps", "no steps in the checklist")]),
            Err(errors) => {
                return Err(errors
                    .into_iter()
                    .map(|e| FieldError::new("steps", e.message))
                    .collect());
            }
        },
        Value::Array(_) => return Err(vec![FieldError::new("steps", "give at least one step")]),
        _ => {
            return Err(vec![FieldError::new(
                "steps",
                "expected an array of steps or a markdown checklist string",
            )]);
        }
    };
    let mut merged = payload.clone();
    // A stored task with criteria and no check keeps the loop's default limit in its
    // canonical form; sent again, that limit would be refused as belonging to a check.
    if let Some(completion) = merged["task"]["completion"].as_object_mut()
        && completion.get("command").is_none_or(Value::is_null)
    {
        completion.remove("maxIterations");
    }
    // A task submitted without steps ran its objective as its one step: that step stays
    // first, under the id it had, and the added ones follow it.
    let existing = match merged["task"]["steps"].as_array() {
        Some(steps) if !steps.is_empty() => steps.clone(),
        _ => vec![json!({ "id": "step-1", "instructions": merged["task"]["instructions"] })],
    };
    let before = existing.len();
    merged["task"]["steps"] = Value::Array(existing.into_iter().chain(new).collect());
    let raw = json!({ "payload": merged });
    super::normalize(&raw, defaults).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| FieldError::new(renamed(&e.path, before), e.message))
            .collect()
    })
}

/// `task.steps[7].title` of the merged task as `steps[2].title` of the request, when the
/// task had 5 steps; a path about the list as a whole is `steps`.
fn renamed(path: &str, before: usize) -> String {
    let Some(rest) = path
        .strip_prefix("payload.")
        .unwrap_or(path)
        .strip_prefix("task.steps")
    else {
        return format!("steps ({path})");
    };
    let index = rest
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .and_then(|(n, tail)| Some((n.parse::<usize>().ok()?, tail)));
    match index {
        Some((n, tail)) if n >= before => format!("steps[{}]{tail}", n - before),
        Some((n, tail)) => format!("steps (the job's step {}{tail})", n + 1),
        None => format!("steps{rest}"),
    }
}
