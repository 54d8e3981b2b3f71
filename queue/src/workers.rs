//! The workers the server has seen: each claim and heartbeat says a worker is alive and
//! what it can run. The dashboard lists them, and tells a queued job that no live worker
//! can run which capabilities are missing, instead of leaving it silently queued.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, TimeDelta, Utc};
use contract::JobId;

/// A worker counts as connected this long after it was last seen. An idle worker
/// long-polls at least every 30 s and a busy one heartbeats at least every 20 s, and the
/// record is refreshed at most every [`WRITE_EVERY`].
pub const LIVE_FOR: TimeDelta = TimeDelta::seconds(60);
/// How often a worker's unchanged record is rewritten: a worker claiming thousands of
/// jobs a second must not write its row each time.
pub const WRITE_EVERY: TimeDelta = TimeDelta::seconds(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRecord {
    /// Its token's name.
    pub id: String,
    pub capabilities: Vec<String>,
    pub version: Option<String>,
    /// How it boxes its steps (`bwrap`, `bwrap, no network`, `off`), if it said.
    pub sandbox: Option<String>,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    /// The jobs it holds now.
    pub running_jobs: Vec<JobId>,
}

/// What one claim or heartbeat says of its worker: a claim what it offers, what it runs
/// and how it boxes its steps; a heartbeat none of these (`None` keeps what was said).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sighting<'a> {
    pub capabilities: Option<&'a [String]>,
    pub version: Option<&'a str>,
    pub sandbox: Option<&'a str>,
}

impl WorkerRecord {
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        now - self.last_seen_at < LIVE_FOR
    }
}

/// Why no connected worker can run a job that needs `required`: the capabilities missing
/// from the worker that comes closest (all of them when none is connected). `None` when
/// some connected worker has them all.
pub fn missing_capabilities(
    required: &[String],
    workers: &[WorkerRecord],
    now: DateTime<Utc>,
) -> Option<Vec<String>> {
    let missing_on = |w: &WorkerRecord| -> Vec<String> {
        required
            .iter()
            .filter(|c| !w.capabilities.contains(c))
            .cloned()
            .collect()
    };
    let closest = workers
        .iter()
        .filter(|w| w.is_live(now))
        .map(missing_on)
        .min_by_key(Vec::len);
    match closest {
        Some(missing) if missing.is_empty() => None,
        Some(missing) => Some(missing),
        None => Some(required.to_vec()),
    }
}

/// What this replica last wrote for each worker, so an unchanged record is rewritten only
/// every [`WRITE_EVERY`].
#[derive(Debug, Default)]
pub(crate) struct SeenCache {
    last: Mutex<HashMap<String, Written>>,
}

/// When a worker's row was last written, with what it then said.
type Written = (
    DateTime<Utc>,
    Option<Vec<String>>,
    Option<String>,
    Option<String>,
);

impl SeenCache {
    /// Whether this sighting must be written (and, if so, remembers it as written).
    pub(crate) fn should_write(&self, id: &str, seen: &Sighting<'_>, now: DateTime<Utc>) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = last.get(id).is_some_and(|(at, caps, ver, sandbox)| {
            now - *at < WRITE_EVERY
                && (seen.capabilities.is_none() || caps.as_deref() == seen.capabilities)
                && (seen.version.is_none() || ver.as_deref() == seen.version)
                && (seen.sandbox.is_none() || sandbox.as_deref() == seen.sandbox)
        });
        if fresh {
            return false;
        }
        let entry = last
            .entry(id.to_string())
            .or_insert((now, None, None, None));
        entry.0 = now;
        if let Some(c) = seen.capabilities {
            entry.1 = Some(c.to_vec());
        }
        if let Some(v) = seen.version {
            entry.2 = Some(v.to_string());
        }
        if let Some(b) = seen.sandbox {
            entry.3 = Some(b.to_string());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(id: &str, caps: &[&str], seen_secs_ago: i64, now: DateTime<Utc>) -> WorkerRecord {
        WorkerRecord {
            id: id.into(),
            capabilities: caps.iter().map(|c| c.to_string()).collect(),
            version: None,
            sandbox: None,
            first_seen_at: now,
            last_seen_at: now - TimeDelta::seconds(seen_secs_ago),
            running_jobs: Vec::new(),
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_job_is_runnable_when_one_live_worker_has_every_capability() {
        let now = Utc::now();
        let need = strings(&["codex", "git", "gh"]);
        let workers = [
            worker("a", &["codex", "git"], 5, now),
            worker("b", &["git"], 5, now),
            worker("old", &["codex", "git", "gh"], 120, now),
        ];
        assert_eq!(
            missing_capabilities(&need, &workers, now),
            Some(strings(&["gh"])),
            "the closest live worker lacks gh; the one that has it all is gone"
        );
        let mut with_gh = workers.to_vec();
        with_gh.push(worker("c", &["codex", "git", "gh", "docker"], 1, now));
        assert_eq!(missing_capabilities(&need, &with_gh, now), None);
        assert_eq!(missing_capabilities(&need, &[], now), Some(need.clone()));
    }

    #[test]
    fn an_unchanged_sighting_is_written_only_every_few_seconds() {
        let cache = SeenCache::default();
        let now = Utc::now();
        let caps = strings(&["git"]);
        let claim = Sighting {
            capabilities: Some(&caps),
            version: Some("1"),
            sandbox: Some("bwrap"),
        };
        let heartbeat = Sighting::default();
        let at = |s: i64| now + TimeDelta::seconds(s);
        assert!(cache.should_write("w", &claim, now));
        assert!(!cache.should_write("w", &claim, at(1)));
        assert!(!cache.should_write("w", &heartbeat, at(2)));
        let more = strings(&["git", "codex"]);
        let offers_more = Sighting {
            capabilities: Some(&more),
            ..heartbeat
        };
        assert!(cache.should_write("w", &offers_more, at(3)));
        let boxed_otherwise = Sighting {
            sandbox: Some("off"),
            ..heartbeat
        };
        assert!(cache.should_write("w", &boxed_otherwise, at(4)));
        assert!(!cache.should_write("w", &boxed_otherwise, at(5)));
        assert!(cache.should_write("w", &heartbeat, now + WRITE_EVERY + TimeDelta::seconds(5)));
    }
}
