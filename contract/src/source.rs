//! Where a job came from when no person submitted it: a GitHub issue or pull request whose
//! label or comment a rule of the server's maps to a task, or a slot of a recurring task.
//! Recorded on the job's payload (`payload.source`) and in its `job.created` event; a
//! source is the job's key (a delivery, a schedule's slot): the same key is the same job.

use serde::{Deserialize, Serialize};

/// `payload.source`: what made the job, by its `kind`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum JobSource {
    /// `{"kind": "github", "issue": URL, "delivery": ID}`: a webhook delivery from
    /// GitHub, an issue labeled or a comment that mentions. One delivery makes one job
    /// however often it comes.
    Github {
        /// The issue or pull request the job is about (its page, `https://github.com/…`).
        issue: String,
        /// GitHub's `X-GitHub-Delivery`.
        delivery: String,
        /// What asked, from the signed body (`comment:ID`, or `label:ISSUE:LABEL:UPDATED`):
        /// the job's key, so one request makes one job whatever delivery id carries it.
        event: String,
        /// The comment that asked for the job, when a mention did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comment: Option<String>,
    },
    /// `{"kind": "schedule", "schedule": ID, "name": NAME, "slot": RFC3339}`: a slot of a
    /// recurring task. One slot makes one job however many replicas see it.
    Schedule {
        schedule: String,
        name: String,
        /// The instant the slot was due, in UTC.
        slot: String,
    },
}

/// The longest delivery id kept (GitHub's are UUIDs).
pub const MAX_DELIVERY_CHARS: usize = 100;
/// The longest address kept.
pub const MAX_URL_CHARS: usize = 2000;

/// Why `id` cannot be a delivery id, if it cannot.
pub fn delivery_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        return Some("required: GitHub's X-GitHub-Delivery id");
    }
    if id.chars().count() > MAX_DELIVERY_CHARS {
        return Some("longer than 100 characters");
    }
    (!id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .then_some("only letters, digits and '-'")
}

impl JobSource {
    /// Why each field cannot be what it says, by its path under `source`.
    pub fn problems(&self) -> Vec<(&'static str, &'static str)> {
        let mut problems = Vec::new();
        match self {
            JobSource::Github {
                issue,
                delivery,
                event,
                comment,
            } => {
                problems.extend(delivery_problem(delivery).map(|p| ("source.delivery", p)));
                if event.is_empty()
                    || event.chars().count() > 300
                    || event.contains(char::is_control)
                {
                    problems.push(("source.event", "1 to 300 characters, on one line"));
                }
                problems.extend(url_problem(issue).map(|p| ("source.issue", p)));
                problems.extend(
                    comment
                        .as_deref()
                        .and_then(url_problem)
                        .map(|p| ("source.comment", p)),
                );
            }
            JobSource::Schedule {
                schedule,
                name,
                slot,
            } => {
                if delivery_problem(schedule).is_some() {
                    problems.push(("source.schedule", "a schedule's id"));
                }
                if name.is_empty() || name.chars().count() > 100 || name.contains(char::is_control)
                {
                    problems.push(("source.name", "1 to 100 characters, on one line"));
                }
                if !is_utc_second(slot) {
                    problems.push(("source.slot", "an instant in UTC, as 2026-11-30T05:00:00Z"));
                }
            }
        }
        problems
    }

    /// Reads a source from `v`, every field a string.
    pub fn read(v: &serde_json::Value) -> Result<JobSource, String> {
        let map = v.as_object().ok_or("an object with a kind")?;
        let text = |key: &str| -> Result<String, String> {
            map.get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("{key}: required, a string"))
        };
        let allowed: &[&str] = match map.get("kind").and_then(serde_json::Value::as_str) {
            Some("github") => &["kind", "issue", "delivery", "event", "comment"],
            Some("schedule") => &["kind", "schedule", "name", "slot"],
            _ => return Err("kind: \"github\" or \"schedule\"".into()),
        };
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!("{unknown}: not a field of this kind"));
        }
        if map.get("kind").and_then(serde_json::Value::as_str) == Some("github") {
            let comment = match map.get("comment") {
                None | Some(serde_json::Value::Null) => None,
                Some(_) => Some(text("comment")?),
            };
            Ok(JobSource::Github {
                issue: text("issue")?,
                delivery: text("delivery")?,
                event: text("event")?,
                comment,
            })
        } else {
            Ok(JobSource::Schedule {
                schedule: text("schedule")?,
                name: text("name")?,
                slot: text("slot")?,
            })
        }
    }
}

/// Read by [`JobSource::read`]: serde's derive of a tagged enum buffers what it reads in
/// machinery of its own, which the browser bundle would carry.
impl<'de> Deserialize<'de> for JobSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        JobSource::read(&v).map_err(serde::de::Error::custom)
    }
}

/// `2026-11-30T05:00:00Z`: a slot as the scheduler writes one.
fn is_utc_second(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| range.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'Z'
}

/// Why `url` cannot be a page's address, if it cannot.
pub fn url_problem(url: &str) -> Option<&'static str> {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Some("an http(s) address");
    }
    if url.chars().count() > MAX_URL_CHARS {
        return Some("longer than 2000 characters");
    }
    url.chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '<' | '>' | '`'))
        .then_some("an address without spaces, quotes or angle brackets")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_written_with_the_keys_the_issue_names() {
        let source = JobSource::Github {
            issue: "https://github.com/octo/hello/issues/7".into(),
            delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
            event: "comment:903".into(),
            comment: None,
        };
        let written = serde_json::to_value(&source).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"kind": "github", "issue": "https://github.com/octo/hello/issues/7", "delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "event": "comment:903"})
        );
        assert_eq!(JobSource::read(&written), Ok(source));
    }

    #[test]
    fn a_delivery_id_and_an_address_are_checked() {
        assert_eq!(delivery_problem("72d3162e-cc78-11e3"), None);
        assert!(delivery_problem("").is_some());
        assert!(delivery_problem("a b").is_some());
        assert!(delivery_problem(&"a".repeat(101)).is_some());
        assert_eq!(url_problem("https://github.com/o/r/issues/1"), None);
        assert!(url_problem("javascript:alert(1)").is_some());
        assert!(url_problem("https://x/\"><script>").is_some());
    }
}
