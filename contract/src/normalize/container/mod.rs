//! `task.container`: the image and command, and the runner's settings, each checked at its
//! path with the rule it broke (the seed system's rules, and what the engine's command
//! line needs: no `,` where a mount is spelled, no line break in an environment file).
//! Settings this contract does not know are carried through untouched.

use serde_json::{Map, Value};

use super::walk::{Checked, Walker, at, field};
use crate::container::ContainerSpec;

#[cfg(feature = "containers")]
mod runner;

const PATH: &str = "task.container";
const KNOWN: [&str; 10] = [
    "enabled",
    "image",
    "command",
    "workdir",
    "env",
    "artifactsSubdir",
    "timeoutSeconds",
    "pull",
    "resources",
    "cacheVolumes",
];

pub fn container(w: &mut Walker, v: Option<&Value>) -> ContainerSpec {
    let Some(map) = v.and_then(|v| w.object(v, PATH)) else {
        return ContainerSpec::default();
    };
    let enabled = field(map, "enabled")
        .and_then(|v| w.boolean(v, "task.container.enabled").ok())
        .unwrap_or(false);
    let image = image(w, map);
    let command = command(w, field(map, "command"));
    if enabled && image == Ok(None) {
        w.error(
            "task.container.image",
            "required when the container is enabled: the image to run, e.g. ghcr.io/org/tool:1.0",
        );
    }
    let mut spec = ContainerSpec {
        enabled,
        image: image.unwrap_or_default(),
        command,
        ..ContainerSpec::default()
    };
    // The runner's settings are checked where tasks are stored (the queue turns the
    // feature on); the browser's build carries them as given, which keeps its bundle lean.
    #[cfg(feature = "containers")]
    let known: &[&str] = {
        runner::runner_settings(w, map, &mut spec);
        &KNOWN
    };
    #[cfg(not(feature = "containers"))]
    let known: &[&str] = &KNOWN[..3];
    spec.extra = map
        .iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    w.no_nul_inside(&Value::Object(spec.extra.clone()), PATH);
    spec
}

fn image(w: &mut Walker, map: &Map<String, Value>) -> Checked<Option<String>> {
    const PATH: &str = "task.container.image";
    let Some(image) = w.opt_text(map, "image", PATH)? else {
        return Ok(None);
    };
    w.check(image, PATH, |i| {
        if i.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("an image reference cannot contain spaces or control characters".into());
        }
        if i.starts_with('-') {
            return Err("an image reference cannot start with `-`".into());
        }
        Ok(())
    })
    .map(Some)
}

fn command(w: &mut Walker, v: Option<&Value>) -> Option<Vec<String>> {
    const PATH: &str = "task.container.command";
    let v = v?;
    let Some(items) = v.as_array() else {
        w.expected(PATH, "an array of strings (the command's argv)", v);
        return None;
    };
    let argv: Vec<Option<String>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| w.string(item, &at(PATH, i)).ok().map(str::to_string))
        .collect();
    argv.into_iter().collect()
}
