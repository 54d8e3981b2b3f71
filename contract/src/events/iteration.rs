//! The completion loop's events (seed 003): each iteration's start and end, with how its
//! check went. Iteration 0 checks what the steps did; each later one runs the agent once
//! more with the check's output, then checks again. And the checkpoints saved after each
//! step and iteration.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::read_payload;
use crate::error::FieldError;
use crate::job::task;
use crate::limits;
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

pub use crate::checkpoint::CheckpointSaved;

/// A worker's loop or checkpoint event checked before the queue stores it: the fields the
/// timeline folds are in range, so a report the fold would misread is refused by name.
/// Other kinds pass (their checks are elsewhere, as `usage`'s is).
pub fn checked_loop_event(kind: &str, payload: &Map<String, Value>) -> Result<(), FieldError> {
    let invalid = |field: &str, why: &str| Err(FieldError::new(format!("payload.{field}"), why));
    let most = *limits::MAX_ITERATIONS.end();
    let iteration_in_range = |n: u32, max: u32| n <= most && max <= most;
    match kind {
        task::ITERATION_STARTED => match read_payload::<IterationStarted>(payload) {
            None => invalid(
                "iteration",
                "required: {iteration, maxIterations}, non-negative integers",
            ),
            Some(it) if !iteration_in_range(it.iteration, it.max_iterations) => invalid(
                "iteration",
                &format!("iteration and maxIterations are at most {most}"),
            ),
            Some(_) => Ok(()),
        },
        task::ITERATION_FINISHED => match read_payload::<IterationFinished>(payload) {
            None => invalid(
                "iteration",
                "required: {iteration, maxIterations, outcome}; check, summary and usage optional",
            ),
            Some(it) if !iteration_in_range(it.iteration, it.max_iterations) => invalid(
                "iteration",
                &format!("iteration and maxIterations are at most {most}"),
            ),
            Some(it)
                if !matches!(
                    it.outcome,
                    StepState::Succeeded | StepState::Failed | StepState::Cancelled
                ) =>
            {
                invalid("outcome", "must be succeeded, failed or cancelled")
            }
            Some(_) => Ok(()),
        },
        task::CHECKPOINT => match read_payload::<CheckpointSaved>(payload) {
            None => invalid(
                "artifact",
                "required: {afterStep or afterIteration, baseCommit, artifact}",
            ),
            Some(c) if c.after_step.is_some() == c.after_iteration.is_some() => invalid(
                "afterStep",
                "give exactly one of afterStep and afterIteration",
            ),
            Some(c) if c.after_step.is_some_and(|i| i >= limits::STEPS) => {
                invalid("afterStep", &format!("must be below {}", limits::STEPS))
            }
            Some(c) if c.after_iteration.is_some_and(|n| n > most) => {
                invalid("afterIteration", &format!("at most {most}"))
            }
            Some(c) if !c.artifact.starts_with("checkpoints/") || c.artifact.len() > 255 => {
                invalid(
                    "artifact",
                    "must name an artifact under checkpoints/ (at most 255 bytes)",
                )
            }
            Some(c) if c.base_commit.is_empty() || c.base_commit.len() > 64 => {
                invalid("baseCommit", "must be a commit id")
            }
            Some(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(kind: &str, payload: Value) -> Result<(), FieldError> {
        checked_loop_event(kind, payload.as_object().unwrap())
    }

    #[test]
    fn loop_and_checkpoint_reports_out_of_range_are_refused_by_field() {
        let ok = json!({ "afterStep": 0, "baseCommit": "abc123", "artifact": "checkpoints/step-0000.patch" });
        assert!(check(task::CHECKPOINT, ok).is_ok());
        for (payload, field) in [
            (
                json!({ "afterStep": 18446744073709551615u64, "baseCommit": "a", "artifact": "checkpoints/x" }),
                "payload.afterStep",
            ),
            (
                json!({ "afterStep": 0, "afterIteration": 1, "baseCommit": "a", "artifact": "checkpoints/x" }),
                "payload.afterStep",
            ),
            (
                json!({ "baseCommit": "a", "artifact": "checkpoints/x" }),
                "payload.afterStep",
            ),
            (
                json!({ "afterStep": 0, "baseCommit": "a", "artifact": "../etc/passwd" }),
                "payload.artifact",
            ),
            (
                json!({ "afterIteration": 999, "baseCommit": "a", "artifact": "checkpoints/x" }),
                "payload.afterIteration",
            ),
            (json!({ "afterStep": "one" }), "payload.artifact"),
        ] {
            let error = check(task::CHECKPOINT, payload.clone()).unwrap_err();
            assert_eq!(error.path, field, "{payload}");
        }
        let running = json!({ "iteration": 1, "maxIterations": 3, "outcome": "running" });
        assert_eq!(
            check(task::ITERATION_FINISHED, running).unwrap_err().path,
            "payload.outcome"
        );
        let huge = json!({ "iteration": 4000000000u32, "maxIterations": 3 });
        assert_eq!(
            check(task::ITERATION_STARTED, huge).unwrap_err().path,
            "payload.iteration"
        );
        assert!(
            check(
                task::ITERATION_STARTED,
                json!({ "iteration": 0, "maxIterations": 3 })
            )
            .is_ok()
        );
        // Another kind is not this check's to judge.
        assert!(check(task::STEP_LOG, json!({ "anything": 1 })).is_ok());
    }
}
