//! A skill selection, at task or step level.

use serde_json::{Map, Value};

use super::walk::{Walker, capability_list, field, join};
use crate::rules;
use crate::wire::SkillSelection;

const FIELDS: &[&str] = &["id", "args", "requiredCapabilities"];

/// On error the returned id is whatever was given (or empty): not `auto`, so a step
/// whose skill is wrong is not also called blank.
pub fn skill(w: &mut Walker, v: &Value, path: &str) -> SkillSelection {
    let Some(map) = w.object(v, path) else {
        return SkillSelection::named("");
    };
    w.reject_unknown(map, path, FIELDS);
    SkillSelection {
        id: id(w, map, path),
        args: args(w, field(map, "args"), &join(path, "args")),
        required_capabilities: capability_list(
            w,
            field(map, "requiredCapabilities"),
            &join(path, "requiredCapabilities"),
        ),
    }
}

fn id(w: &mut Walker, map: &Map<String, Value>, prefix: &str) -> String {
    let path = join(prefix, "id");
    let Ok(id) = w.opt_text(map, "id", &path) else {
        return String::new();
    };
    let Some(id) = id else {
        w.error(
            path,
            "required: a skill name, or \"auto\" to let the agent choose",
        );
        return String::new();
    };
    if let Err(message) = rules::skill_id(&id) {
        w.error(path, message);
    }
    id
}

/// Arguments belong to the skill, so they are kept as given; only their shape is checked.
fn args(w: &mut Walker, v: Option<&Value>, path: &str) -> Map<String, Value> {
    match v {
        None => Map::new(),
        Some(v @ Value::Object(map)) => {
            w.no_nul_inside(v, path);
            map.clone()
        }
        Some(other) => {
            w.expected(path, "an object (the skill's arguments by name)", other);
            Map::new()
        }
    }
}
