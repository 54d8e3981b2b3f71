//! The job envelope: type, priority, attempts, affinity, payload.

use serde_json::{Map, Value};

use super::payload::payload;
use super::walk::{Walker, field, short};
use crate::defaults::Defaults;
use crate::limits;
use crate::model::NormalizedTask;
use crate::wire::JobType;

// `notBefore` and `dependsOn` are read apart, by `schedule::not_before` and
// `depends::depends_on`.
const FIELDS: &[&str] = &[
    "type",
    "priority",
    "maxAttempts",
    "affinityKey",
    "notBefore",
    "dependsOn",
    "payload",
];

pub fn envelope(w: &mut Walker, raw: &Value, defaults: &Defaults) -> Option<NormalizedTask> {
    let Some(map) = raw.as_object() else {
        w.error(
            "",
            format!(
                "expected a JSON object with the fields {}",
                FIELDS.join(", ")
            ),
        );
        return None;
    };
    w.reject_unknown(map, "", FIELDS);
    job_type(w, map);
    let priority = w.bounded(
        map,
        "priority",
        "priority",
        limits::PRIORITY,
        limits::DEFAULT_PRIORITY,
    );
    let max_attempts = w.bounded(
        map,
        "maxAttempts",
        "maxAttempts",
        limits::MAX_ATTEMPTS,
        limits::DEFAULT_MAX_ATTEMPTS,
    );
    let affinity_key = affinity_key(w, map);
    let payload = match field(map, "payload") {
        Some(v) => payload(w, v, defaults),
        None => {
            w.error("payload", "required: the task to run (repository and task)");
            None
        }
    };
    Some(NormalizedTask {
        job_type: JobType::Task,
        priority,
        max_attempts,
        affinity_key,
        payload: payload?,
    })
}

fn job_type(w: &mut Walker, map: &Map<String, Value>) {
    let Ok(Some(t)) = w.opt_string(map, "type", "type") else {
        return;
    };
    if !t.trim().eq_ignore_ascii_case(JobType::Task.as_str()) {
        w.error(
            "type",
            format!(
                "unsupported job type `{}`; only \"task\" is accepted",
                short(t)
            ),
        );
    }
}

fn affinity_key(w: &mut Walker, map: &Map<String, Value>) -> Option<String> {
    let key = w
        .opt_string(map, "affinityKey", "affinityKey")
        .ok()??
        .trim();
    if key.is_empty() {
        w.error(
            "affinityKey",
            "must not be blank; leave it out (or null) when the job has no affinity",
        );
        return None;
    }
    w.check(key, "affinityKey", |k| {
        crate::rules::max_chars(k, limits::AFFINITY_KEY_CHARS)
    })
    .ok()
    .map(str::to_string)
}
