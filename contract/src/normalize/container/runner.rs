//! The runner's settings of `task.container` (built where tasks are stored: the queue
//! turns the `containers` feature on), each checked at its path with the rule it broke.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::PATH;
use crate::container::{CacheVolume, ContainerResources, ContainerSpec, PullPolicy, RESERVED_ENV};
use crate::normalize::walk::{Walker, at, field, join, join_user_key};

/// Seven days: a longer run is a service, not a task.
const MAX_TIMEOUT_SECONDS: u64 = 7 * 24 * 3600;
const MAX_ENV: usize = 200;
const MAX_ENV_VALUE_BYTES: usize = 32 * 1024;
const MAX_CACHE_VOLUMES: usize = 16;
const MAX_PATH_CHARS: usize = 1024;

/// `workdir`, `env`, `artifactsSubdir`, `timeoutSeconds`, `pull`, `resources` and
/// `cacheVolumes`, each checked at its path, into `spec`.
pub(super) fn runner_settings(w: &mut Walker, map: &Map<String, Value>, spec: &mut ContainerSpec) {
    spec.workdir = field(map, "workdir").and_then(|v| {
        let path = join(PATH, "workdir");
        let text = w.string(v, &path).ok()?;
        w.check(text.to_string(), &path, |p| mount_path(p)).ok()
    });
    spec.env = env(w, field(map, "env"));
    spec.artifacts_subdir = field(map, "artifactsSubdir").and_then(|v| artifacts_subdir(w, v));
    spec.timeout_seconds = field(map, "timeoutSeconds").and_then(|v| {
        let path = join(PATH, "timeoutSeconds");
        let n = w.integer(v, &path).ok()?;
        match u64::try_from(n) {
            Ok(n) if (1..=MAX_TIMEOUT_SECONDS).contains(&n) => Some(n),
            _ => {
                w.error(
                    path,
                    format!("must be between 1 and {MAX_TIMEOUT_SECONDS} seconds"),
                );
                None
            }
        }
    });
    spec.pull = field(map, "pull").and_then(|v| {
        let path = join(PATH, "pull");
        let text = w.string(v, &path).ok()?;
        match text.trim().to_ascii_lowercase().parse::<PullPolicy>() {
            Ok(pull) => Some(pull),
            Err(_) => {
                w.error(path, "must be if-missing or always");
                None
            }
        }
    });
    spec.resources = field(map, "resources").and_then(|v| resources(w, v));
    spec.cache_volumes = field(map, "cacheVolumes")
        .map(|v| cache_volumes(w, v, spec.workdir.as_deref()))
        .unwrap_or_default();
}

/// An absolute path inside the container, as a mount target.
fn mount_path(p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err("must be an absolute path, e.g. /workspace".into());
    }
    if p.trim_end_matches('/').is_empty() {
        return Err("cannot be / itself".into());
    }
    if p.split('/').any(|part| part == "..") {
        return Err("may not contain '..'".into());
    }
    if p.contains(',') {
        return Err("may not contain ','".into());
    }
    if p.chars().any(char::is_control) {
        return Err("may not contain control characters".into());
    }
    if p.chars().count() > MAX_PATH_CHARS {
        return Err(format!("must be at most {MAX_PATH_CHARS} characters"));
    }
    Ok(())
}

fn env(w: &mut Walker, v: Option<&Value>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let path = join(PATH, "env");
    let Some(map) = v.and_then(|v| w.object(v, &path)) else {
        return env;
    };
    if map.len() > MAX_ENV {
        w.error(&path, format!("may hold at most {MAX_ENV} variables"));
        return env;
    }
    for (key, value) in map {
        let at_key = join_user_key(&path, key);
        let name = key.trim();
        let refused = if name.is_empty() {
            Some("a variable needs a name".to_string())
        } else if name.contains('=') {
            Some("a variable's name may not contain '='".into())
        } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Some("a variable's name may not contain spaces or control characters".into())
        } else if RESERVED_ENV.iter().any(|r| r.eq_ignore_ascii_case(name)) {
            Some(format!(
                "may not override reserved key '{}': the worker sets {}",
                name.to_ascii_uppercase(),
                RESERVED_ENV.join(", ")
            ))
        } else {
            None
        };
        if let Some(why) = refused {
            w.error(at_key, why);
            continue;
        }
        let text = match value {
            Value::String(s) => match crate::text::refuse_nul(&at_key, s) {
                Ok(()) => s.clone(),
                Err(error) => {
                    w.errors.push(error);
                    continue;
                }
            },
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                w.expected(at_key, "a string", other);
                continue;
            }
        };
        if text.contains('\n') || text.contains('\r') {
            w.error(at_key, "may not contain a line break");
            continue;
        }
        if text.len() > MAX_ENV_VALUE_BYTES {
            w.error(
                at_key,
                format!("must be at most {MAX_ENV_VALUE_BYTES} bytes"),
            );
            continue;
        }
        env.insert(name.to_string(), text);
    }
    env
}

/// A relative folder under the job's artifacts, as given less its `.` and empty parts.
fn artifacts_subdir(w: &mut Walker, v: &Value) -> Option<String> {
    let path = join(PATH, "artifactsSubdir");
    let text = w.string(v, &path).ok()?;
    let parts: Vec<&str> = text
        .split('/')
        .map(str::trim)
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    let refused = if parts.contains(&"..") {
        Some("may not contain '..'")
    } else if parts.first().is_some_and(|first| {
        [
            "logs",
            "patches",
            "checkpoints",
            "session",
            "task_context.json",
            "publish_result.json",
        ]
        .contains(first)
    }) {
        Some(
            "may not be among the worker's own artifacts (logs/, patches/, checkpoints/, session/, task_context.json, publish_result.json)",
        )
    } else if text.chars().any(char::is_control) {
        Some("may not contain control characters")
    } else if parts.iter().any(|p| p.starts_with('.')) {
        Some("a folder's name may not start with '.'")
    } else if text.chars().count() > 200 {
        Some("must be at most 200 characters")
    } else {
        None
    };
    if let Some(why) = refused {
        w.error(path, why);
        return None;
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

fn resources(w: &mut Walker, v: &Value) -> Option<ContainerResources> {
    let path = join(PATH, "resources");
    let map = w.object(v, &path)?;
    w.reject_unknown(map, &path, &["cpus", "memory"]);
    let mut resources = ContainerResources::default();
    if let Some(v) = field(map, "cpus") {
        let at_cpus = join(&path, "cpus");
        let text = match v {
            Value::Number(n) => Some(n.to_string()),
            Value::String(s) => Some(s.trim().to_string()),
            other => {
                w.expected(&at_cpus, "a number of CPUs, e.g. 1.5", other);
                None
            }
        };
        if let Some(text) = text {
            match text.parse::<f64>() {
                Ok(n) if n > 0.0 && n <= 1024.0 && !text.contains(['e', 'E']) => {
                    resources.cpus = Some(text)
                }
                _ => w.error(at_cpus, "must be a number of CPUs above 0, e.g. 0.5 or 2"),
            }
        }
    }
    if let Some(v) = field(map, "memory") {
        let at_memory = join(&path, "memory");
        let text = match v {
            Value::Number(n) if n.is_u64() => Some(n.to_string()),
            Value::String(s) => Some(s.trim().to_ascii_lowercase()),
            other => {
                w.expected(&at_memory, "an amount of memory, e.g. 512m or 2g", other);
                None
            }
        };
        if let Some(text) = text {
            if memory(&text) {
                resources.memory = Some(text);
            } else {
                w.error(
                    at_memory,
                    "must be bytes or a number with a unit b, k, m or g (e.g. 512m, 2g)",
                );
            }
        }
    }
    (resources != ContainerResources::default()).then_some(resources)
}

/// `512m`, `2g`, `1048576`, `1.5g`: what docker and podman take.
fn memory(text: &str) -> bool {
    let digits = text.trim_end_matches(['b', 'k', 'm', 'g']);
    let unit = &text[digits.len()..];
    !digits.is_empty()
        && matches!(unit, "" | "b" | "k" | "m" | "g" | "kb" | "mb" | "gb")
        && digits.parse::<f64>().is_ok_and(|n| n > 0.0)
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
}

fn cache_volumes(w: &mut Walker, v: &Value, workdir: Option<&str>) -> Vec<CacheVolume> {
    let path = join(PATH, "cacheVolumes");
    let Some(items) = v.as_array() else {
        w.expected(&path, "an array of {name, target}", v);
        return Vec::new();
    };
    if items.len() > MAX_CACHE_VOLUMES {
        w.error(
            &path,
            format!("may hold at most {MAX_CACHE_VOLUMES} volumes"),
        );
        return Vec::new();
    }
    let workdir = workdir.unwrap_or(crate::container::DEFAULT_WORKDIR);
    let mut volumes = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at_item = at(&path, i);
        let Some(map) = w.object(item, &at_item) else {
            continue;
        };
        w.reject_unknown(map, &at_item, &["name", "target"]);
        let name = match w.opt_text(map, "name", &join(&at_item, "name")) {
            Ok(Some(name)) => w
                .check(name, &join(&at_item, "name"), |n| {
                    let mut chars = n.chars();
                    let first = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
                    let rest = chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
                    if !(first && rest) || n.len() > 128 {
                        return Err("has invalid format: a letter or digit, then letters, digits, _ . or - (at most 128)".into());
                    }
                    Ok(())
                })
                .ok(),
            Ok(None) => {
                w.error(join(&at_item, "name"), "is required");
                None
            }
            Err(_) => None,
        };
        let target = match w.opt_text(map, "target", &join(&at_item, "target")) {
            Ok(Some(target)) => w
                .check(target, &join(&at_item, "target"), |t| {
                    mount_path(t)?;
                    let t = t.trim_end_matches('/');
                    let w = workdir.trim_end_matches('/');
                    if t == w || w.starts_with(&format!("{t}/")) || t.starts_with(&format!("{w}/"))
                    {
                        return Err(format!(
                            "may not be, hold or lie inside the workdir {workdir}"
                        ));
                    }
                    Ok(())
                })
                .ok(),
            Ok(None) => {
                w.error(join(&at_item, "target"), "is required");
                None
            }
            Err(_) => None,
        };
        if let (Some(name), Some(target)) = (name, target) {
            volumes.push(CacheVolume { name, target });
        }
    }
    volumes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::normalize::container::container;

    fn checked(v: Value) -> (ContainerSpec, Vec<(String, String)>) {
        let mut w = Walker::default();
        let spec = container(&mut w, Some(&v));
        let errors = w.errors.into_iter().map(|e| (e.path, e.message)).collect();
        (spec, errors)
    }

    #[test]
    fn every_setting_of_the_seed_runner_is_read_and_kept() {
        let (spec, errors) = checked(json!({
            "enabled": true,
            "image": "python:3.12-slim",
            "command": ["python", "-c", "print(1)"],
            "workdir": "/src",
            "env": { "MODE": "ci", "LEVEL": 3, "FAST": true },
            "artifactsSubdir": "/out/./reports/",
            "timeoutSeconds": 120,
            "pull": "Always",
            "resources": { "cpus": 1.5, "memory": "512M" },
            "cacheVolumes": [{ "name": "pip-cache", "target": "/root/.cache/pip" }],
            "runnerHint": { "x": 1 },
        }));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(spec.workdir(), "/src");
        assert_eq!(spec.env["LEVEL"], "3");
        assert_eq!(spec.env["FAST"], "true");
        assert_eq!(spec.artifacts_subdir(), "out/reports");
        assert_eq!(spec.timeout_seconds(), 120);
        assert_eq!(spec.pull(), PullPolicy::Always);
        let resources = spec.resources.clone().unwrap();
        assert_eq!(
            (resources.cpus.as_deref(), resources.memory.as_deref()),
            (Some("1.5"), Some("512m"))
        );
        assert_eq!(spec.cache_volumes[0].name, "pip-cache");
        assert_eq!(spec.extra["runnerHint"], json!({ "x": 1 }));
        // Written back in the same shape, and read again to the same.
        let again = checked(serde_json::to_value(&spec).unwrap());
        assert_eq!(again, (spec, Vec::new()));
    }

    #[test]
    fn defaults_fill_what_is_left_out() {
        let (spec, errors) = checked(json!({ "enabled": true, "image": "alpine" }));
        assert!(errors.is_empty());
        assert_eq!(spec.workdir(), "/workspace");
        assert_eq!(spec.artifacts_subdir(), "container");
        assert_eq!(spec.timeout_seconds(), 3600);
        assert_eq!(spec.pull(), PullPolicy::IfMissing);
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({ "enabled": true, "image": "alpine", "command": null })
        );
    }

    #[test]
    fn artifacts_may_not_land_among_the_worker_s_own() {
        for subdir in [
            "logs",
            "/patches/x",
            "./logs/steps",
            "task_context.json",
            "session",
            "checkpoints/a",
        ] {
            let (_, errors) =
                checked(json!({ "enabled": true, "image": "a", "artifactsSubdir": subdir }));
            assert_eq!(errors.len(), 1, "{subdir}: {errors:?}");
            assert!(
                errors[0].1.contains("the worker's own artifacts"),
                "{errors:?}"
            );
        }
        let (spec, errors) =
            checked(json!({ "enabled": true, "image": "a", "artifactsSubdir": "reports/logs" }));
        assert!(errors.is_empty());
        assert_eq!(spec.artifacts_subdir(), "reports/logs");
    }

    #[test]
    fn each_bad_setting_is_named_with_its_rule() {
        let (_, errors) = checked(json!({
            "enabled": true,
            "image": "-rm",
            "workdir": "src",
            "env": { "JOB_ID": "x", "job_id": "y", "A=B": "c", "MULTI": "a\nb", "OBJ": {} },
            "artifactsSubdir": "../etc",
            "timeoutSeconds": 0,
            "pull": "never",
            "resources": { "cpus": "lots", "memory": "2 tb", "gpus": 1 },
            "cacheVolumes": [
                { "name": "bad name", "target": "/cache" },
                { "name": "ok", "target": "relative" },
                { "name": "ok", "target": "/workspace/cache" },
                { "target": "/c" },
            ],
        }));
        let expect = [
            ("task.container.image", "cannot start with `-`"),
            ("task.container.workdir", "must be an absolute path"),
            (
                "task.container.env.JOB_ID",
                "may not override reserved key 'JOB_ID'",
            ),
            (
                "task.container.env.job_id",
                "may not override reserved key 'JOB_ID'",
            ),
            ("task.container.env[\"A=B\"]", "may not contain '='"),
            ("task.container.env.MULTI", "may not contain a line break"),
            ("task.container.env.OBJ", "expected a string"),
            ("task.container.artifactsSubdir", "may not contain '..'"),
            ("task.container.timeoutSeconds", "must be between 1 and"),
            ("task.container.pull", "must be if-missing or always"),
            ("task.container.resources.cpus", "must be a number of CPUs"),
            (
                "task.container.resources.memory",
                "must be bytes or a number with a unit",
            ),
            ("task.container.resources.gpus", "unknown field"),
            ("task.container.cacheVolumes[0].name", "has invalid format"),
            (
                "task.container.cacheVolumes[1].target",
                "must be an absolute path",
            ),
            (
                "task.container.cacheVolumes[2].target",
                "may not be, hold or lie inside the workdir",
            ),
            ("task.container.cacheVolumes[3].name", "is required"),
        ];
        for (field, why) in expect {
            assert!(
                errors.iter().any(|(f, m)| f == field && m.contains(why)),
                "{field}: {why} not in {errors:#?}"
            );
        }
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
    }
}
