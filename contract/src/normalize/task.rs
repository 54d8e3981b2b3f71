//! The task object: objective, skill, settings, steps, container.

use serde_json::{Map, Value};

use super::budget::task_budget;
use super::container::container;
use super::rounds::rounds;
use super::settings::{git, publish, runtime};
use super::skill::skill;
use super::step_list::{has_steps, steps};
use super::walk::{Checked, Walker, field, join};
use crate::defaults::Defaults;
use crate::limits;
use crate::model::{Completion, Notify, TaskSpec};
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
    "completion",
    "notify",
    "budget",
    "rounds",
];
const COMPLETION_FIELDS: &[&str] = &[
    "criteria",
    "maxIterations",
    "command",
    "outputPattern",
    "timeoutSeconds",
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
    let completion = completion(w, field(map, "completion"));
    let notify = notify(w, field(map, "notify"));
    let budget = task_budget(w, field(map, "budget"), runtime.mode, defaults);
    let rounds = rounds(w, field(map, "rounds"), steps.len().max(1));
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
        completion,
        notify,
        budget,
        rounds,
    })
}

/// `{webhookUrl}`: where the server posts the task's end; `null` or absent is nowhere.
fn notify(w: &mut Walker, v: Option<&Value>) -> Option<Notify> {
    const PATH: &str = "task.notify";
    let map = w.object(v?, PATH)?;
    w.reject_unknown(map, PATH, &["webhookUrl"]);
    let url = w
        .opt_text(map, "webhookUrl", "task.notify.webhookUrl")
        .ok()
        .flatten()?;
    let url = w
        .check(url, "task.notify.webhookUrl", |u| rules::webhook_url(u))
        .ok()?;
    Some(Notify { webhook_url: url })
}

/// `{criteria?, maxIterations?, command?, outputPattern?, timeoutSeconds?}`; `null` or
/// absent is no completion criteria. The pattern and the timeout belong to the command.
fn completion(w: &mut Walker, v: Option<&Value>) -> Option<Completion> {
    const PATH: &str = "task.completion";
    let map = w.object(v?, PATH)?;
    w.reject_unknown(map, PATH, COMPLETION_FIELDS);
    let text = |w: &mut Walker, key: &str, chars: usize| {
        let path = join(PATH, key);
        w.opt_text(map, key, &path)
            .ok()
            .flatten()
            .and_then(|text| w.check(text, &path, |t| rules::max_chars(t, chars)).ok())
    };
    let criteria = text(w, "criteria", limits::CRITERIA_CHARS);
    let command = text(w, "command", limits::CHECK_COMMAND_CHARS);
    let output_pattern = text(w, "outputPattern", limits::OUTPUT_PATTERN_CHARS).and_then(|p| {
        w.check(p, "task.completion.outputPattern", |p| rules::pattern(p))
            .ok()
    });
    let max_iterations = w.bounded(
        map,
        "maxIterations",
        "task.completion.maxIterations",
        limits::MAX_ITERATIONS,
        limits::DEFAULT_MAX_ITERATIONS,
    );
    let timeout_seconds = field(map, "timeoutSeconds").map(|_| {
        w.bounded(
            map,
            "timeoutSeconds",
            "task.completion.timeoutSeconds",
            limits::CHECK_TIMEOUT_SECONDS,
            limits::DEFAULT_CHECK_TIMEOUT_SECONDS,
        )
    });
    if command.is_none() {
        // A limit, a pattern or a timeout without the check they belong to would do
        // nothing: refused rather than kept to no effect.
        for key in ["maxIterations", "outputPattern", "timeoutSeconds"] {
            let path = join(PATH, key);
            // One error a field: one out of its range says so already.
            if field(map, key).is_some() && !w.errors.iter().any(|e| e.path == path) {
                w.error(
                    join(PATH, key),
                    "belongs to the check: give task.completion.command too (a shell command run in the repository after the steps)",
                );
            }
        }
    }
    Some(Completion {
        criteria,
        max_iterations,
        command,
        output_pattern,
        timeout_seconds,
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
