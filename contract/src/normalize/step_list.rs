//! `task.steps`: an array of step objects or a markdown checklist string.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::skill::skill;
use super::walk::{Checked, Reported, Walker, at, field, join, join_user_key};
use crate::checklist::parse_checklist;
use crate::limits;
use crate::model::Step;
use crate::rules;
use crate::steps::generated_step_id;

const PATH: &str = "task.steps";
const FIELDS: &[&str] = &["id", "title", "instructions", "skill"];

/// Step fields that exist on the task; each names where the value belongs instead.
const OVERRIDES: &[(&str, &str)] = &[
    ("runtime", "runtime"),
    ("model", "runtime.model"),
    ("effort", "runtime.effort"),
    ("repository", "repository"),
    ("repo", "repository"),
    ("targetRuntime", "runtime"),
    ("git", "git"),
    ("publish", "publish"),
    ("container", "container"),
];

pub const BLANK_STEP: &str = "step is blank: give it instructions or a skill, or remove it";

/// Whether the client asked for any steps at all, valid or not.
pub fn has_steps(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::String(s)) => s
            .lines()
            .map(str::trim)
            .any(|l| !l.is_empty() && !l.starts_with('#')),
        _ => false,
    }
}

pub fn steps(w: &mut Walker, v: Option<&Value>) -> Vec<Step> {
    match v {
        None => Vec::new(),
        Some(Value::Array(items)) => step_array(w, items),
        Some(Value::String(text)) => checklist(w, text),
        Some(other) => {
            w.expected(
                PATH,
                "an array of steps or a markdown checklist string",
                other,
            );
            Vec::new()
        }
    }
}

/// Each checklist item becomes `{instructions: text}` and then passes the same checks
/// as a step object, so both spellings obey one set of limits.
fn checklist(w: &mut Walker, text: &str) -> Vec<Step> {
    match parse_checklist(text) {
        Ok(items) => {
            let objects: Vec<Value> = items
                .into_iter()
                .map(|item| json!({ "instructions": item.text }))
                .collect();
            step_array(w, &objects)
        }
        Err(errors) => {
            for e in errors {
                w.error(PATH, e.message);
            }
            Vec::new()
        }
    }
}

/// Where a step's id came from, which decides how a duplicate is explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdSource {
    Given,
    Generated,
    /// The given id was invalid (already reported); not checked for duplicates.
    Invalid,
}

fn step_array(w: &mut Walker, items: &[Value]) -> Vec<Step> {
    if items.len() > limits::STEPS {
        w.error(
            PATH,
            format!(
                "at most {} steps (got {}); split the work into several tasks",
                limits::STEPS,
                items.len()
            ),
        );
    }
    let mut first_use: HashMap<String, usize> = HashMap::new();
    let mut steps = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let path = at(PATH, index);
        let Some((step, source)) = step(w, item, index, &path) else {
            continue;
        };
        if source == IdSource::Invalid {
            steps.push(step);
            continue;
        }
        if let Some(first) = first_use.get(&step.id) {
            let message = match source {
                IdSource::Given => format!(
                    "duplicate step id `{}`: task.steps[{first}] already uses it; step ids must be unique",
                    step.id
                ),
                _ => format!(
                    "this step has no id and its generated id `{}` is already used by task.steps[{first}]; \
                     give this step an explicit id",
                    step.id
                ),
            };
            w.error(join(&path, "id"), message);
        } else {
            first_use.insert(step.id.clone(), index);
        }
        steps.push(step);
    }
    steps
}

fn step(w: &mut Walker, v: &Value, index: usize, path: &str) -> Option<(Step, IdSource)> {
    let Some(map) = v.as_object() else {
        w.expected(
            path,
            "a step object with id, title, instructions and skill",
            v,
        );
        return None;
    };
    reject_non_step_fields(w, map, path);
    let (id, source) = match step_id(w, map, path) {
        Ok(Some(id)) => (id, IdSource::Given),
        Ok(None) => (generated_step_id(index), IdSource::Generated),
        Err(Reported) => (generated_step_id(index), IdSource::Invalid),
    };
    let title = title(w, map, path);
    let instructions = instructions(w, map, path);
    let skill = field(map, "skill").map(|v| skill(w, v, &join(path, "skill")));
    // The rule and its reason are in the module docs (crate::normalize). A step whose
    // instructions were rejected is not blank: that error already says what to fix.
    if instructions == Ok(None) && skill.as_ref().is_none_or(|s| s.is_auto()) {
        w.error(path, BLANK_STEP);
    }
    Some((
        Step {
            id,
            title,
            instructions: instructions.unwrap_or_default(),
            skill,
        },
        source,
    ))
}

fn reject_non_step_fields(w: &mut Walker, map: &Map<String, Value>, path: &str) {
    for key in map.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        let message = match OVERRIDES.iter().find(|(name, _)| name == key) {
            Some((_, home)) => format!(
                "step-level overrides are not allowed; set {home} on the task, it applies to every step"
            ),
            None => "unknown field; a step has only id, title, instructions and skill".to_string(),
        };
        w.error(join_user_key(path, key), message);
    }
}

fn step_id(w: &mut Walker, map: &Map<String, Value>, prefix: &str) -> Checked<Option<String>> {
    let path = join(prefix, "id");
    let Some(id) = w.opt_text(map, "id", &path)? else {
        return Ok(None);
    };
    w.check(id, &path, |id| rules::step_id(id)).map(Some)
}

fn title(w: &mut Walker, map: &Map<String, Value>, prefix: &str) -> Option<String> {
    let path = join(prefix, "title");
    let title = w.opt_text(map, "title", &path).ok()??;
    w.check(title, &path, |t| {
        rules::single_line(t)?;
        rules::max_chars(t, limits::STEP_TITLE_CHARS)
    })
    .ok()
}

fn instructions(w: &mut Walker, map: &Map<String, Value>, prefix: &str) -> Checked<Option<String>> {
    let path = join(prefix, "instructions");
    let Some(text) = w.opt_text(map, "instructions", &path)? else {
        return Ok(None);
    };
    w.check(text, &path, |t| {
        rules::max_chars(t, limits::INSTRUCTIONS_CHARS)
    })
    .map(Some)
}
