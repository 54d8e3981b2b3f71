//! The task object: objective, skill, settings, steps, container.

use serde_json::{Map, Value};

use super::settings::{container, git, publish, runtime};
use super::skill::skill;
use super::step_list::{has_steps, steps};
use super::walk::{Checked, Walker, field};
use crate::defaults::Defaults;
use crate::limits;
use crate::model::TaskSpec;
use crate::modes::RuntimeMode;
use crate::rules;
use crate::wire::SkillSelection;

const FIELDS: &[&str] = &[
    "instructions",
    "skill",
    "runtime",
    "git",
    "publish",
    "steps",
    "container",
];

pub fn task(
    w: &mut Walker,
    v: Option<&Value>,
    target: Checked<Option<RuntimeMode>>,
    defaults: &Defaults,
) -> Option<TaskSpec> {
    let Some(v) = v else {
        w.error(
            "task",
            "required: an object with at least instructions (the task objective)",
        );
        return None;
    };
    let map = w.object(v, "task")?;
    w.reject_unknown(map, "task", FIELDS);
    let instructions = instructions(w, map);
    let skill =
        field(map, "skill").map_or_else(SkillSelection::auto, |v| skill(w, v, "task.skill"));
    let runtime = runtime(w, field(map, "runtime"), target, defaults);
    let git = git(w, field(map, "git"));
    let publish = publish(w, field(map, "publish"), defaults);
    let steps = steps(w, field(map, "steps"));
    let container = container(w, field(map, "container"));
    if container.enabled && has_steps(field(map, "steps")) {
        w.error(
            "task.steps",
            "container execution does not support steps yet; remove the steps (put the work in \
             task.instructions) or disable the container",
        );
    }
    Some(TaskSpec {
        instructions,
        skill,
        runtime,
        git,
        publish,
        steps,
        container,
    })
}

/// The objective is required even with steps (FR-005): every step's prompt starts with it.
fn instructions(w: &mut Walker, map: &Map<String, Value>) -> String {
    const PATH: &str = "task.instructions";
    let Ok(text) = w.opt_text(map, "instructions", PATH) else {
        return String::new();
    };
    let Some(text) = text else {
        w.error(
            PATH,
            "required: describe the task objective; it is included in every step's prompt",
        );
        return String::new();
    };
    w.check(text, PATH, |t| {
        rules::max_chars(t, limits::INSTRUCTIONS_CHARS)
    })
    .unwrap_or_default()
}
