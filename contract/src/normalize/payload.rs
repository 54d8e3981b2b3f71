//! The payload: repository, runtime target, capabilities, auth refs and the task.

use std::str::FromStr;

use serde_json::{Map, Value};

use super::task::task;
use super::walk::{Checked, Reported, Walker, at, field, join, short};
use crate::capabilities::derive_capabilities;
use crate::defaults::Defaults;
use crate::model::Payload;
use crate::modes::{ParseModeError, RuntimeMode};
use crate::rules;
use crate::wire::AuthRefs;

const FIELDS: &[&str] = &[
    "repository",
    "repo",
    "targetRuntime",
    "requiredCapabilities",
    "auth",
    "task",
];
const AUTH_FIELDS: &[&str] = &["repoAuthRef", "publishAuthRef"];

pub fn payload(w: &mut Walker, v: &Value, defaults: &Defaults) -> Option<Payload> {
    let map = w.object(v, "payload")?;
    w.reject_unknown(map, "", FIELDS);
    let repository = repository(w, map);
    let target = mode::<RuntimeMode>(w, map, "targetRuntime", "targetRuntime");
    let required_capabilities = capability_list(
        w,
        field(map, "requiredCapabilities"),
        "requiredCapabilities",
    );
    let auth = auth(w, map);
    let task = task(w, field(map, "task"), target, defaults)?;
    let mut payload = Payload {
        repository,
        target_runtime: task.runtime.mode,
        required_capabilities,
        auth,
        task,
    };
    match derive_capabilities(&payload) {
        Ok(caps) => payload.required_capabilities = caps,
        Err(errors) => w.errors.extend(errors),
    }
    Some(payload)
}

/// `repo` is accepted as an alias because older clients send it; output always says `repository`.
fn repository(w: &mut Walker, map: &Map<String, Value>) -> String {
    let (Ok(primary), Ok(alias)) = (
        w.opt_text(map, "repository", "repository"),
        w.opt_text(map, "repo", "repo"),
    ) else {
        return String::new();
    };
    if let (Some(a), Some(b)) = (&primary, &alias)
        && a != b
    {
        w.error(
            "repo",
            "differs from repository; `repo` is an old name of `repository`, give only one",
        );
        return String::new();
    }
    let path = if primary.is_some() {
        "repository"
    } else {
        "repo"
    };
    let Some(repo) = primary.or(alias) else {
        w.error("repository", "required: the git repository to work on, e.g. owner/name or https://host/owner/name.git");
        return String::new();
    };
    w.check(repo, path, |r| rules::repository(r))
        .unwrap_or_default()
}

/// Reads a runtime or publish mode; the wire spelling is lowercase, but any case is accepted.
pub fn mode<T>(
    w: &mut Walker,
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Checked<Option<T>>
where
    T: FromStr<Err = ParseModeError>,
{
    let Some(s) = w.opt_string(map, key, path)? else {
        return Ok(None);
    };
    s.parse().map(Some).map_err(|e: ParseModeError| {
        w.error(
            path,
            ParseModeError {
                value: short(s),
                ..e
            }
            .to_string(),
        );
        Reported
    })
}

/// Valid items come back trimmed and lowercased; invalid ones are reported and left out.
pub fn capability_list(w: &mut Walker, v: Option<&Value>, path: &str) -> Vec<String> {
    let Some(v) = v else { return Vec::new() };
    let Some(items) = v.as_array() else {
        w.expected(path, "an array of strings", v);
        return Vec::new();
    };
    let mut caps = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = at(path, i);
        let Ok(s) = w.string(item, &item_path) else {
            continue;
        };
        match rules::capability(s) {
            Ok(c) => caps.push(c),
            Err(message) => w.error(item_path, message),
        }
    }
    caps
}

fn auth(w: &mut Walker, map: &Map<String, Value>) -> AuthRefs {
    let Some(map) = field(map, "auth").and_then(|v| w.object(v, "auth")) else {
        return AuthRefs::default();
    };
    w.reject_unknown(map, "auth", AUTH_FIELDS);
    let mut reference = |key: &str| {
        let path = join("auth", key);
        let value = w.opt_text(map, key, &path).ok()??;
        w.check(value, &path, |v| rules::auth_ref(v)).ok()
    };
    AuthRefs {
        repo_auth_ref: reference("repoAuthRef"),
        publish_auth_ref: reference("publishAuthRef"),
    }
}
