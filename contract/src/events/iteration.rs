//! The completion loop's events (seed 003): each iteration's start and end, with how its
//! check went. Iteration 0 checks what the steps did; each later one runs the agent once
//! more with the check's output, then checks again. And the checkpoints saved after each
//! step and iteration.

use serde::{Deserialize, Serialize};

use crate::states::StepState;
use crate::usage::StepUsage;

/// An iteration began: the check of the steps' work (0), or one more agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationStarted {
    pub iteration: u32,
    pub max_iterations: u32,
}

/// How one run of the completion check went.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub passed: bool,
    /// The command's exit code; absent when it was stopped (timed out, cancelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Whether the output matched `outputPattern`; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_matched: Option<bool>,
    /// The end of what it printed (stdout and stderr as they came), redacted.
    pub output_tail: String,
    pub duration_ms: u64,
}

impl CheckResult {
    /// The result in a few words: "the check passed", "the check failed (exit code 1)".
    pub fn verdict(&self) -> String {
        if self.passed {
            return "the check passed".into();
        }
        if self.timed_out {
            return "the check timed out".into();
        }
        match (self.exit_code, self.pattern_matched) {
            (Some(0), Some(false)) => "the check's output did not match its pattern".into(),
            (Some(code), _) => format!("the check failed (exit code {code})"),
            (None, _) => "the check failed".into(),
        }
    }
}

/// An iteration ended. `outcome` is `succeeded` when it got as far as its check (which
/// may still have failed: see `check`), `failed` when its agent run failed, `cancelled`
/// when it was stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationFinished {
    pub iteration: u32,
    pub max_iterations: u32,
    pub outcome: StepState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckResult>,
    /// The agent's final message, or why its run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What the iteration's agent run used (none for iteration 0, which runs no agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StepUsage>,
}

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
}

impl CheckpointSaved {
    /// Its id: `step-1` after the first step (1-based, as the page numbers steps),
    /// `iteration-2` after iteration 2.
    pub fn id(&self) -> String {
        match (self.after_step, self.after_iteration) {
            (Some(index), _) => format!("step-{}", index + 1),
            (None, Some(n)) => format!("iteration-{n}"),
            (None, None) => "start".into(),
        }
    }

    /// "after step 1", "after iteration 2".
    pub fn label(&self) -> String {
        match (self.after_step, self.after_iteration) {
            (Some(index), _) => format!("after step {}", index + 1),
            (None, Some(n)) => format!("after iteration {n}"),
            (None, None) => "at the start".into(),
        }
    }
}
