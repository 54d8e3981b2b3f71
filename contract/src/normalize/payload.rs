//! The payload: repository, runtime target, capabilities, auth refs and the task.

use serde_json::{Map, Value};

use super::task::task;
use super::walk::{Walker, capability_list, field, join, mode};
use crate::capabilities::derive_capabilities;
use crate::defaults::Defaults;
use crate::model::Payload;
use crate::modes::RuntimeMode;
use crate::rules;
use crate::source::JobSource;
use crate::wire::AuthRefs;

const FIELDS: &[&str] = &[
    "repository",
    "repo",
    "targetRuntime",
    "requiredCapabilities",
    "auth",
    "task",
    "source",
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
    let source = field(map, "source").and_then(|v| source(w, v));
    let task = task(w, field(map, "task"), target, defaults)?;
    let mut payload = Payload {
        repository,
        target_runtime: task.runtime.mode,
        required_capabilities,
        auth,
        task,
        source,
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

/// `source` where tasks are not stored (the browser).
#[cfg(not(feature = "sources"))]
fn source(w: &mut Walker, _: &Value) -> Option<JobSource> {
    w.error(
        "source",
        "set only by the server's integrations: leave it out",
    );
    None
}

/// `source`, as the server's integrations write it; read back strictly, since a job's
/// stored payload is normalized again (a follow-up, appended steps).
#[cfg(feature = "sources")]
fn source(w: &mut Walker, v: &Value) -> Option<JobSource> {
    let parsed = match JobSource::read(v) {
        Ok(parsed) => parsed,
        Err(e) => {
            w.error("source", format!("not a job source: {e}"));
            return None;
        }
    };
    let problems = parsed.problems();
    for (path, problem) in &problems {
        w.error(*path, *problem);
    }
    problems.is_empty().then_some(parsed)
}
