//! What a worker holds and hands the queue: the [`Fence`] of its lease, the [`ClaimRequest`]
//! it claims with, the [`Completion`]s it reports. A leaf: the state machine, the waiters
//! and the service all use it, and it uses none of them.

use std::time::Duration;

use contract::{Job, JobId};

use crate::error::{QueueError, refuse_nul};

/// The proof of a lease a worker presents with every write: its id and the attempt it
/// claimed. Once the lease is taken back (expired and requeued, reclaimed, cancelled), the
/// job's attempt or owner no longer match and the write is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub worker_id: String,
    pub attempt: u32,
}

impl Fence {
    pub fn new(worker_id: impl Into<String>, attempt: u32) -> Self {
        Fence {
            worker_id: worker_id.into(),
            attempt,
        }
    }

    /// The fence of the lease `job` was just claimed with.
    pub fn of(job: &Job) -> Option<Fence> {
        Some(Fence::new(job.claimed_by.clone()?, job.attempt))
    }
}

/// Most jobs one [`Queue::claim_many`] may lease.
pub const MAX_CLAIM_BATCH: u32 = 1000;

/// One job of [`Queue::complete_many`].
#[derive(Debug, Clone)]
pub struct Completion {
    pub id: JobId,
    pub fence: Fence,
    pub summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub worker_id: String,
    /// What the worker offers; a job is claimable only if it requires a subset of these.
    pub capabilities: Vec<String>,
    /// `None`: any job type.
    pub allowed_types: Option<Vec<String>>,
    /// `None`: any repository. Compared by [`contract::rules::repository_key`] with the
    /// payload's `repository`, so `octo/a` allows its GitHub URLs too.
    pub allowed_repositories: Option<Vec<String>>,
    /// How long the lease lasts without a heartbeat.
    pub lease: Duration,
    /// Take no job of a repository that has this many jobs running already (on any
    /// worker): the worker's own limit, which tightens the queue's
    /// ([`QueueConfig::max_running_per_repository`](crate::QueueConfig)). `None`: the
    /// queue's alone.
    pub max_running_per_repository: Option<u32>,
}

impl ClaimRequest {
    /// The checks every claim passes first: a worker id, and no NUL in what it offers.
    pub fn validate(&self) -> Result<(), QueueError> {
        if self.worker_id.trim().is_empty() {
            return Err(QueueError::invalid("workerId", "must not be empty"));
        }
        refuse_nul("workerId", &self.worker_id)?;
        for (i, capability) in self.capabilities.iter().enumerate() {
            refuse_nul(&format!("capabilities[{i}]"), capability)?;
        }
        for (i, job_type) in self.allowed_types.iter().flatten().enumerate() {
            refuse_nul(&format!("allowedTypes[{i}]"), job_type)?;
        }
        if self.max_running_per_repository == Some(0) {
            return Err(QueueError::invalid(
                "maxRunningPerRepository",
                "must be 1 or more (leave it out for no limit of the worker's own)",
            ));
        }
        Ok(())
    }

    /// Whether this claimer may take `job` (of `repository`), by the rules both claim
    /// statements apply: its required capabilities a subset of the claimer's, its type
    /// and repository allowed.
    pub(crate) fn accepts(&self, job: &Job, repository: &str) -> bool {
        job.required_capabilities
            .iter()
            .all(|c| self.capabilities.contains(c))
            && self
                .allowed_types
                .as_ref()
                .is_none_or(|types| types.contains(&job.job_type))
            && self
                .repository_keys()
                .is_none_or(|repos| repos.iter().any(|r| r == repository))
    }

    /// The repositories this claimer may take, as the queue stores a job's: each one's
    /// key, and each as given too (a job stored before keys were, as submitted).
    pub(crate) fn repository_keys(&self) -> Option<Vec<String>> {
        self.allowed_repositories.as_ref().map(|repos| {
            let mut keys: Vec<String> = repos
                .iter()
                .flat_map(|r| [contract::rules::repository_key(r), r.clone()])
                .collect();
            keys.sort();
            keys.dedup();
            keys
        })
    }
}
