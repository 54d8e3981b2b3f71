//! The worker's own limits on what it claims: at most N running jobs of a runtime on this
//! worker (`max_running_per_runtime`), kept by offering the server no runtime that is at its
//! limit. The limit per repository is the server's to keep (it counts every worker's jobs),
//! so the worker only sends its own with each claim.

use std::collections::BTreeMap;

use contract::{Job, RuntimeMode};

/// The runtimes of the jobs this worker runs now, by the task running each (`K`: a
/// `tokio::task::Id`).
#[derive(Debug)]
pub(super) struct RunningRuntimes<K> {
    tasks: BTreeMap<K, &'static str>,
}

impl<K> Default for RunningRuntimes<K> {
    fn default() -> Self {
        RunningRuntimes {
            tasks: BTreeMap::new(),
        }
    }
}

/// The runtime a job runs: the one runtime among its required capabilities.
pub(super) fn runtime_of(job: &Job) -> Option<&'static str> {
    RuntimeMode::ALL
        .iter()
        .map(|mode| mode.as_str())
        .find(|name| job.required_capabilities.iter().any(|c| c == name))
}

impl<K: Ord> RunningRuntimes<K> {
    pub(super) fn started(&mut self, task: K, runtime: Option<&'static str>) {
        if let Some(runtime) = runtime {
            self.tasks.insert(task, runtime);
        }
    }

    /// The task ended, however it did (a panic too).
    pub(super) fn ended(&mut self, task: K) {
        self.tasks.remove(&task);
    }

    fn count(&self, runtime: &str) -> usize {
        self.tasks.values().filter(|r| **r == runtime).count()
    }

    /// What to offer the server: `capabilities` without the runtimes at their limit in
    /// `limits`. `None` when the worker offers runtimes and every one is at its limit, so
    /// no job it could take would come: the worker waits for one of its jobs to end.
    pub(super) fn offer(
        &self,
        capabilities: &[String],
        limits: &BTreeMap<String, usize>,
    ) -> Option<Vec<String>> {
        let is_runtime = |c: &str| RuntimeMode::ALL.iter().any(|m| m.as_str() == c);
        let full = |c: &str| limits.get(c).is_some_and(|limit| self.count(c) >= *limit);
        let offered: Vec<String> = capabilities
            .iter()
            .filter(|c| !(is_runtime(c) && full(c)))
            .cloned()
            .collect();
        let offers_runtimes = capabilities.iter().any(|c| is_runtime(c));
        let any_left = offered.iter().any(|c| is_runtime(c));
        (!offers_runtimes || any_left).then_some(offered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[&str]) -> Vec<String> {
        list.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn a_runtime_at_its_limit_is_not_offered_and_comes_back_when_a_job_ends() {
        let limits = BTreeMap::from([("codex".to_string(), 1)]);
        let all = caps(&["codex", "claude", "git"]);
        let mut running = RunningRuntimes::default();
        assert_eq!(running.offer(&all, &limits), Some(all.clone()));
        running.started(1, Some("codex"));
        assert_eq!(running.offer(&all, &limits), Some(caps(&["claude", "git"])));
        // A runtime with no limit is offered however many of its jobs run.
        running.started(2, Some("claude"));
        running.started(3, Some("claude"));
        assert_eq!(running.offer(&all, &limits), Some(caps(&["claude", "git"])));
        running.ended(1);
        assert_eq!(running.offer(&all, &limits), Some(all));
    }

    #[test]
    fn a_worker_whose_every_runtime_is_full_offers_nothing() {
        let limits = BTreeMap::from([("codex".to_string(), 2)]);
        let only_codex = caps(&["codex", "git"]);
        let mut running = RunningRuntimes::default();
        running.started(1, Some("codex"));
        assert!(running.offer(&only_codex, &limits).is_some());
        running.started(2, Some("codex"));
        assert_eq!(running.offer(&only_codex, &limits), None);
        // A worker that offers no runtime at all (a git-only helper) is never held.
        assert_eq!(
            running.offer(&caps(&["git"]), &limits),
            Some(caps(&["git"]))
        );
    }
}
