//! Where a job stands between runs, as its row and its events both carry it: the
//! checkpoint a run saved (and a resume restores) and an operator's pause request. A leaf:
//! the job's row (`job`) and the events (`events`) both hold these, and neither imports
//! the other for them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A checkpoint was saved: all the work so far, as one patch against `base_commit`, after
/// a step or after an iteration's agent run (exactly one of the two is set).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointSaved {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_step: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_iteration: Option<u32>,
    /// The commit the job's work is measured against.
    pub base_commit: String,
    /// The patch's artifact name (`checkpoints/step-0000.patch`).
    pub artifact: String,
    /// After an iteration: how many steps had run. Steps appended later still run when
    /// the job resumes from here. A round's start: the steps of the rounds before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_done: Option<usize>,
    /// The start of follow-up round `round`: the work of the rounds before it (the queue
    /// makes this one; no worker saves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// A round's start: the branch the job last pushed. The round starts from its tip
    /// when it is still there (so what others pushed to it is kept), else from the patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl CheckpointSaved {
    /// Its id: `step-1` after the first step (1-based, as the page numbers steps),
    /// `iteration-2` after iteration 2.
    pub fn id(&self) -> String {
        match (self.after_step, self.after_iteration, self.round) {
            (Some(index), _, _) => format!("step-{}", index.saturating_add(1)),
            (None, Some(n), _) => format!("iteration-{n}"),
            (None, None, Some(round)) => format!("round-{round}"),
            (None, None, None) => "start".into(),
        }
    }

    /// The index of the first step a job resumed from here runs: the next step, or none
    /// of a task's `step_count` after an iteration (the loop goes on).
    pub fn resume_step(&self, step_count: usize) -> usize {
        match (self.after_step, self.steps_done) {
            (Some(index), _) => index.saturating_add(1).min(step_count),
            (None, Some(done)) => done.min(step_count),
            (None, None) => step_count,
        }
    }

    /// "after step 1", "after iteration 2".
    pub fn label(&self) -> String {
        match (self.after_step, self.after_iteration, self.round) {
            (Some(index), _, _) => format!("after step {}", index.saturating_add(1)),
            (None, Some(n), _) => format!("after iteration {n}"),
            (None, None, Some(round)) => format!("at the start of round {round}"),
            (None, None, None) => "at the start".into(),
        }
    }
}

/// `job.pause_requested`, and a running job's `pauseRequested` until its worker stops: who
/// asked, when, and whether the running step is stopped (`immediate`) or may finish first.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseRequest {
    pub requested_at: DateTime<Utc>,
    pub requested_by: Option<String>,
    /// Stop the running step now (its work since the last checkpoint is lost), rather
    /// than at the next step or iteration boundary.
    #[serde(default)]
    pub immediate: bool,
    /// Why: an operator asked (left out), or the job's budget is spent.
    #[serde(default, skip_serializing_if = "PauseReason::is_operator")]
    pub reason: PauseReason,
}

/// Why a job pauses (`pauseReason`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PauseReason {
    /// Someone asked for it.
    #[default]
    Operator,
    /// Its budget (`task.budget`) is spent: raise it, then resume.
    Budget,
}

crate::wire_names!(PauseReason, "pause reason", exact {
    Operator = "operator",
    Budget = "budget",
});

impl PauseReason {
    pub fn is_operator(&self) -> bool {
        *self == PauseReason::Operator
    }
}
