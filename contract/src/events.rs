//! The payloads of the events a worker reports while it runs a task (seeds 000 and 001), one
//! type per kind. The worker writes them and every reader (the timeline, the queue's usage
//! totals, the dashboard, the CLI, MCP) reads them through these types, so a payload's keys
//! are spelled once, here. The kinds themselves are in [`crate::job::task`].
//!
//! The queue's own events (`job.*`) have theirs in `queue.rs`, re-exported here.
//!
//! Reading is lenient, as the timeline is: [`TaskEvent::read`] ignores keys it does not know
//! and answers `None` for another kind or a payload that is not this kind's.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::FieldError;
use crate::job::{JobEvent, task};
use crate::states::StageState;
use crate::steps::ResolvedStep;
use crate::usage::StepUsage;

/// A payload that goes with one event kind.
pub trait TaskEvent: Serialize + DeserializeOwned {
    /// The kind of the events that carry this payload.
    const KIND: &'static str;

    /// The payload as an event carries it: a JSON object.
    fn payload(&self) -> Map<String, Value> {
        payload_of(self)
    }

    /// This kind's payload, when `event` is of this kind and carries one.
    fn read(event: &JobEvent) -> Option<Self> {
        (event.kind == Self::KIND)
            .then(|| read_payload(&event.payload))
            .flatten()
    }
}

/// Any payload type here as an event carries it: a JSON object.
pub fn payload_of(payload: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(payload) {
        Ok(Value::Object(map)) => map,
        // Every type here is a struct of plain fields, which serializes to an object.
        _ => Map::new(),
    }
}

/// Any payload type here from an event's payload, ignoring keys it does not know; `None`
/// for a payload that is not one.
pub fn read_payload<T: DeserializeOwned>(payload: &Map<String, Value>) -> Option<T> {
    T::deserialize(payload).ok()
}

/// A stage began; `stage` is one of [`task::STAGES`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStarted {
    pub stage: String,
}

/// A stage ended. A worker that predates `outcome` sent none: the stage succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageFinished {
    pub stage: String,
    /// `succeeded`, `failed`, `skipped` or `cancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<StageState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// The steps the execute stage is about to run (seed 001: count and ids).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepsPlan {
    pub count: usize,
    pub step_ids: Vec<String>,
}

/// The step a step event is about: the metadata of seed 000's StepExecutionEvent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRef {
    /// 0-based position in the task.
    pub step_index: usize,
    pub step_id: String,
    pub effective_skill: String,
    pub has_step_instructions: bool,
    /// The follow-up round that added the step; absent for the job's own (round 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
}

impl From<&ResolvedStep> for StepRef {
    fn from(step: &ResolvedStep) -> StepRef {
        StepRef {
            step_index: step.index,
            step_id: step.id.clone(),
            effective_skill: step.effective_skill.clone(),
            has_step_instructions: step.has_step_instructions,
            round: (step.round > 1).then_some(step.round),
        }
    }
}

/// `task.round.started`: a follow-up round's run began at its first step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundStarted {
    pub round: u32,
    pub from_step_index: usize,
    /// How many steps the round added.
    pub steps: usize,
}

/// `task.round.finished`: how a follow-up round's run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundFinished {
    pub round: u32,
    pub outcome: crate::states::StepState,
}

/// `task.session.restarted`: the agent run of `step` (none for an iteration of the
/// completion loop) began a new session of `runtime` where it meant to continue the job's
/// (`previous`, when one was known).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRestarted {
    #[serde(flatten)]
    pub step: Option<StepRef>,
    pub runtime: crate::RuntimeMode,
    pub reason: crate::session::SessionLoss,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
}

/// A step's agent invocation is about to start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStarted {
    #[serde(flatten)]
    pub step: StepRef,
}

/// How a step ended, for [`StepFinished`] and [`StepFailed`] alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepEnd {
    #[serde(flatten)]
    pub step: StepRef,
    /// A finished step's: the agent's final message; a failed one's: why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What the CLI reported the step used; absent when it reported nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StepUsage>,
}

impl StepEnd {
    pub fn new(step: StepRef, summary: Option<String>, usage: &StepUsage) -> StepEnd {
        StepEnd {
            step,
            summary,
            usage: Some(*usage).filter(|u| !u.is_empty()),
        }
    }
}

/// A step's agent invocation succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StepFinished(pub StepEnd);

/// A step failed: the agent failed, timed out, or could not be started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StepFailed(pub StepEnd);

/// A running step was stopped on request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepCancelled {
    #[serde(flatten)]
    pub step: StepRef,
    /// How long the stop took.
    pub stop_ms: u64,
    /// Whether SIGKILL was needed after the grace period.
    pub killed: bool,
    /// What the agent used before it was stopped, and how long it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StepUsage>,
}

/// A line (or a batch of lines) of a running step's output, for the live tail; the text is
/// the event's message.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepLog {
    pub step_index: usize,
}

/// Something the operator should know that did not stop the task. Each cause fills in what
/// it knows: the step it happened in, the commits an agent made on its own, the output
/// lines the worker had to leave out while the server could not be reached.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    #[serde(flatten)]
    pub step: Option<StepRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commits: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out_lines: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out_bytes: Option<usize>,
}

/// The one key every step event carries (a log line and a step's warning too), read alone
/// by whoever only needs to know which step an event is about. Read as a whole payload,
/// it skips the rest unread; `None` is an event about no step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepIndex {
    #[serde(default)]
    pub step_index: Option<usize>,
}

impl StepIndex {
    /// The step `event` is about, whatever its kind; `None` for an event about no step.
    pub fn of(event: &JobEvent) -> Option<usize> {
        StepIndex::deserialize(&event.payload)
            .ok()
            .and_then(|s| s.step_index)
    }
}

/// A step end's `usage` read alone, before it is trusted: [`reported_usage`] checks it
/// whatever else the payload holds.
#[derive(Debug, Deserialize)]
struct ReportedUsage {
    #[serde(default)]
    usage: Option<Value>,
}

/// The `usage` a worker's step event carries, checked: `None` for an event that is not
/// a step's end or carries no usage (or an empty one), an error naming the field for
/// one that is not a [`StepUsage`] or has a negative price. The queue adds what this
/// returns to the job's totals, so a bad report is refused rather than summed.
pub fn reported_usage(
    kind: &str,
    payload: &Map<String, Value>,
) -> Result<Option<StepUsage>, FieldError> {
    if ![
        task::STEP_FINISHED,
        task::STEP_FAILED,
        task::STEP_CANCELLED,
        task::ITERATION_FINISHED,
    ]
    .contains(&kind)
    {
        return Ok(None);
    }
    let reported = ReportedUsage::deserialize(payload)
        .ok()
        .and_then(|r| r.usage);
    let Some(raw) = reported.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let usage = StepUsage::deserialize(&raw).map_err(|e| {
        FieldError::new(
            "payload.usage",
            format!("must be {{inputTokens, cachedInputTokens, outputTokens, reasoningTokens: non-negative integers, costUsd: a non-negative number}}: {e}"),
        )
    })?;
    if usage.cost_usd.is_some_and(|c| !(c >= 0.0 && c.is_finite())) {
        return Err(FieldError::new(
            "payload.usage.costUsd",
            "must be a non-negative number",
        ));
    }
    Ok(Some(usage).filter(|u| !u.is_empty()))
}

macro_rules! kind {
    ($($ty:ident = $kind:path),+ $(,)?) => {
        $(impl TaskEvent for $ty {
            const KIND: &'static str = $kind;
        })+
    };
}

kind! {
    StageStarted = task::STAGE_STARTED,
    StageFinished = task::STAGE_FINISHED,
    StepsPlan = task::STEPS_PLAN,
    StepStarted = task::STEP_STARTED,
    StepFinished = task::STEP_FINISHED,
    StepFailed = task::STEP_FAILED,
    StepCancelled = task::STEP_CANCELLED,
    RoundStarted = task::ROUND_STARTED,
    RoundFinished = task::ROUND_FINISHED,
    SessionRestarted = task::SESSION_RESTARTED,
    StepLog = task::STEP_LOG,
    Warning = task::WARNING,
    IterationStarted = task::ITERATION_STARTED,
    IterationFinished = task::ITERATION_FINISHED,
    CheckpointSaved = task::CHECKPOINT,
}

mod iteration;
mod queue;
pub use iteration::*;
pub use queue::*;

#[cfg(test)]
mod tests;
