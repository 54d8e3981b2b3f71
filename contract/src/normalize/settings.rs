//! Task-level settings that apply to every step: runtime, git, publish.

use serde_json::{Map, Value};

use super::walk::{Checked, Reported, Walker, join, mode};
use crate::defaults::Defaults;
use crate::feedback::PrFeedback;
use crate::limits;
use crate::model::{PublishSettings, RuntimeSettings};
use crate::modes::{PublishMode, RuntimeMode};
use crate::rules;
use crate::wire::GitSettings;

const RUNTIME_FIELDS: &[&str] = &["mode", "model", "effort"];
const GIT_FIELDS: &[&str] = &["startingBranch", "newBranch"];
const PUBLISH_FIELDS: &[&str] = &[
    "mode",
    "prBaseBranch",
    "commitMessage",
    "prTitle",
    "prBody",
    "approval",
    "feedback",
];
const FEEDBACK_FIELDS: &[&str] = &["ci", "reviews", "maxRounds"];

/// The object at `path`, with its unknown fields reported; `None` when absent or not an object.
fn section<'a>(
    w: &mut Walker,
    v: Option<&'a Value>,
    path: &str,
    fields: &[&str],
) -> Option<&'a Map<String, Value>> {
    let map = w.object(v?, path)?;
    w.reject_unknown(map, path, fields);
    Some(map)
}

/// `targetRuntime` and `task.runtime.mode` are two spellings of one choice; either may
/// be given, and when both are they must agree.
pub fn runtime(
    w: &mut Walker,
    v: Option<&Value>,
    target: Checked<Option<RuntimeMode>>,
    defaults: &Defaults,
) -> RuntimeSettings {
    const PATH: &str = "task.runtime";
    let map = section(w, v, PATH, RUNTIME_FIELDS);
    let given = match map {
        Some(map) => mode::<RuntimeMode>(w, map, "mode", "task.runtime.mode"),
        None => Ok(None),
    };
    let resolved = match (target, given) {
        (Ok(Some(t)), Ok(Some(m))) if t != m => {
            w.error(
                "task.runtime.mode",
                format!("disagrees with targetRuntime `{t}`; they must name the same runtime, or give only one of them"),
            );
            Err(Reported)
        }
        (Ok(t), Ok(m)) => Ok(m.or(t).unwrap_or(defaults.runtime)),
        _ => Err(Reported),
    };
    let mode = resolved.unwrap_or(defaults.runtime);
    let fallback = defaults.for_runtime(mode);
    let (model, effort) = match map {
        Some(map) => (model(w, map), effort(w, map, resolved)),
        None => (Ok(None), Ok(None)),
    };
    RuntimeSettings {
        mode,
        model: model.unwrap_or_default().or_else(|| fallback.model.clone()),
        effort: effort
            .unwrap_or_default()
            .or_else(|| fallback.effort.clone()),
    }
}

fn model(w: &mut Walker, map: &Map<String, Value>) -> Checked<Option<String>> {
    const PATH: &str = "task.runtime.model";
    let Some(model) = w.opt_text(map, "model", PATH)? else {
        return Ok(None);
    };
    w.check(model, PATH, |m| rules::model(m)).map(Some)
}

/// Checked against the runtime's own levels, which is only possible once the runtime is known.
fn effort(
    w: &mut Walker,
    map: &Map<String, Value>,
    runtime: Checked<RuntimeMode>,
) -> Checked<Option<String>> {
    const PATH: &str = "task.runtime.effort";
    let Some(effort) = w.opt_text(map, "effort", PATH)? else {
        return Ok(None);
    };
    let runtime = runtime?;
    rules::effort(runtime, &effort)
        .map(Some)
        .map_err(|message| w.error(PATH, message))
        .map_err(|()| Reported)
}

pub fn git(w: &mut Walker, v: Option<&Value>) -> GitSettings {
    let Some(map) = section(w, v, "task.git", GIT_FIELDS) else {
        return GitSettings::default();
    };
    GitSettings {
        starting_branch: branch(w, map, "startingBranch", "task.git"),
        new_branch: branch(w, map, "newBranch", "task.git"),
    }
}

fn branch(w: &mut Walker, map: &Map<String, Value>, key: &str, prefix: &str) -> Option<String> {
    let path = join(prefix, key);
    let name = w.opt_text(map, key, &path).ok()??;
    w.check(name, &path, |n| rules::branch_name(n)).ok()
}

pub fn publish(w: &mut Walker, v: Option<&Value>, defaults: &Defaults) -> PublishSettings {
    const PATH: &str = "task.publish";
    let Some(map) = section(w, v, PATH, PUBLISH_FIELDS) else {
        return PublishSettings {
            mode: defaults.publish_mode,
            pr_base_branch: None,
            commit_message: None,
            pr_title: None,
            pr_body: None,
            approval_required: defaults.approval_required,
            feedback: None,
        };
    };
    let mode = mode::<PublishMode>(w, map, "mode", "task.publish.mode")
        .ok()
        .flatten();
    let pr_base_branch = branch(w, map, "prBaseBranch", PATH);
    let commit_message = w
        .opt_text(map, "commitMessage", "task.publish.commitMessage")
        .ok()
        .flatten();
    let pr_title = pr_title(w, map);
    let pr_body = w
        .opt_text(map, "prBody", "task.publish.prBody")
        .ok()
        .flatten();
    let approval_required = match w.opt_text(map, "approval", "task.publish.approval") {
        Ok(None) => defaults.approval_required,
        Ok(Some(text)) => match text.as_str() {
            "required" => true,
            "none" => false,
            _ => {
                w.error(
                    "task.publish.approval",
                    "use \"required\" (stop before publishing until an operator approves) or \"none\"",
                );
                false
            }
        },
        Err(_) => false,
    };
    let mode = mode.unwrap_or(defaults.publish_mode);
    let feedback = feedback(w, map.get("feedback"), mode);
    PublishSettings {
        mode,
        pr_base_branch,
        commit_message,
        pr_title,
        pr_body,
        approval_required,
        feedback,
    }
}

/// `task.publish.feedback`: given, it is on; `ci` and `reviews` each default to on, and
/// one of them must be. Only a pull request has checks and reviews to watch.
fn feedback(w: &mut Walker, v: Option<&Value>, mode: PublishMode) -> Option<PrFeedback> {
    const PATH: &str = "task.publish.feedback";
    if v.is_none_or(Value::is_null) {
        return None;
    }
    let map = section(w, v, PATH, FEEDBACK_FIELDS)?;
    let flag = |w: &mut Walker, key: &str| match map.get(key) {
        None | Some(Value::Null) => true,
        Some(v) => w.boolean(v, &join(PATH, key)).unwrap_or(false),
    };
    let ci = flag(w, "ci");
    let reviews = flag(w, "reviews");
    let max_rounds = w.bounded(
        map,
        "maxRounds",
        "task.publish.feedback.maxRounds",
        PrFeedback::MAX_ROUNDS,
        PrFeedback::DEFAULT_MAX_ROUNDS,
    );
    if !ci && !reviews {
        w.error(
            PATH,
            "watches nothing with ci and reviews both false: leave feedback out instead",
        );
        return None;
    }
    if mode != PublishMode::Pr {
        w.error(
            PATH,
            "only a pull request has checks and reviews to watch: set task.publish.mode to pr",
        );
        return None;
    }
    Some(PrFeedback {
        ci,
        reviews,
        max_rounds,
    })
}

fn pr_title(w: &mut Walker, map: &Map<String, Value>) -> Option<String> {
    const PATH: &str = "task.publish.prTitle";
    let title = w.opt_text(map, "prTitle", PATH).ok()??;
    w.check(title, PATH, |t| {
        rules::single_line(t)?;
        rules::max_chars(t, limits::PR_TITLE_CHARS)
    })
    .ok()
}
