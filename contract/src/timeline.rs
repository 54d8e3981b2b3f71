//! The timeline fold: a job's events read as the state of each step and stage. It lives in
//! the contract so every reader of a job (the dashboard on the server and in the browser,
//! the CLI, MCP) tells the same story from the same events.
//!
//! The fold is lenient where the worker is concerned: an event of another kind, for a step
//! the task does not have, or for a stage it does not know, changes nothing, so one odd
//! event never hides the rest of the timeline. A stage's end names its `outcome`; an end
//! without one is a success (how workers before the outcome reported it), and an outcome
//! outside [`StageState`] leaves the stage as it was.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::events::{StageFinished, StageStarted, StepIndex, TaskEvent};
use crate::job::{JobEvent, task};
use crate::modes::ParseModeError;
use crate::usage::StepUsage;
use crate::wire_names;

/// Where a step of a task is, as its latest event says. Read back from its name through
/// [`FromStr`], which keeps the browser bundle smaller than a derived enum visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum StepState {
    /// No event named it yet.
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

wire_names!(StepState, "step state", exact {
    Pending = "pending",
    Running = "running",
    Succeeded = "succeeded",
    Failed = "failed",
    Cancelled = "cancelled",
});

impl StepState {
    /// The state an event of `kind` moves its step into; `None` for a kind that does not
    /// (a log line, the plan).
    fn after(kind: &str) -> Option<StepState> {
        match kind {
            task::STEP_STARTED => Some(StepState::Running),
            task::STEP_FINISHED => Some(StepState::Succeeded),
            task::STEP_FAILED => Some(StepState::Failed),
            task::STEP_CANCELLED => Some(StepState::Cancelled),
            _ => None,
        }
    }
}

/// Where one of the three stages (prepare, execute, publish) is; read back as
/// [`StepState`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum StageState {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Publishing with nothing to publish, or with publish mode `none`.
    Skipped,
    Cancelled,
}

wire_names!(StageState, "stage state", exact {
    Pending = "pending",
    Running = "running",
    Succeeded = "succeeded",
    Failed = "failed",
    Skipped = "skipped",
    Cancelled = "cancelled",
});

impl StageState {
    /// Whether a finished stage can end in this state: the running and pending states are
    /// no outcome.
    pub fn is_outcome(self) -> bool {
        !matches!(self, StageState::Pending | StageState::Running)
    }
}

/// Serde reads a state through its name (`try_from = "String"`), which keeps the browser
/// bundle smaller than a derived visitor.
macro_rules! from_name {
    ($state:ident) => {
        impl TryFrom<String> for $state {
            type Error = ParseModeError;

            fn try_from(name: String) -> Result<Self, Self::Error> {
                name.parse()
            }
        }
    };
}

from_name!(StepState);
from_name!(StageState);

/// One step as its events tell it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepProgress {
    pub state: StepState,
    /// The latest start: a retried step starts over.
    pub started_at: Option<DateTime<Utc>>,
    /// When the latest run ended; cleared by a new start.
    pub ended_at: Option<DateTime<Utc>>,
    /// What the latest run used, as its end reported it (none while it runs, and none
    /// for a report the queue would refuse).
    pub usage: Option<StepUsage>,
}

impl StepProgress {
    /// How long the latest run took, or has taken by `now_ms` (milliseconds since the
    /// epoch) while it runs; `None` for a step never seen starting.
    pub fn duration_ms(&self, now_ms: i64) -> Option<i64> {
        let start = self.started_at?.timestamp_millis();
        let end = match self.state {
            StepState::Running => now_ms,
            _ => self.ended_at?.timestamp_millis(),
        };
        Some(end - start)
    }
}

/// A task's steps and stages, folded from its events in the order they were appended.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// One per step of the task, by `stepIndex`.
    pub steps: Vec<StepProgress>,
    /// In the order of [`task::STAGES`].
    pub stages: [StageState; 3],
}

impl Timeline {
    /// The timeline of a task of `step_count` steps after `events`, oldest first.
    pub fn from_events<'a>(
        step_count: usize,
        events: impl IntoIterator<Item = &'a JobEvent>,
    ) -> Timeline {
        let mut timeline = Timeline {
            steps: vec![StepProgress::default(); step_count],
            stages: Default::default(),
        };
        for event in events {
            timeline.apply(event);
        }
        timeline
    }

    /// Folds one more event in, as a live reader receives them.
    pub fn apply(&mut self, event: &JobEvent) {
        if let Some(state) = StepState::after(&event.kind) {
            self.apply_step(event, state);
        } else {
            self.apply_stage(event);
        }
    }

    fn apply_step(&mut self, event: &JobEvent, state: StepState) {
        let Some(step) = StepIndex::of(event).and_then(|i| self.steps.get_mut(i)) else {
            return;
        };
        step.state = state;
        if state == StepState::Running {
            step.started_at = Some(event.created_at);
            step.ended_at = None;
        } else {
            step.ended_at = Some(event.created_at);
        }
        step.usage = StepUsage::of_step_event(&event.kind, &event.payload)
            .ok()
            .flatten();
    }

    fn apply_stage(&mut self, event: &JobEvent) {
        let (name, state) = if let Some(started) = StageStarted::read(event) {
            (started.stage, StageState::Running)
        } else if let Some(finished) = StageFinished::read(event) {
            match finished.outcome {
                None => (finished.stage, StageState::Succeeded),
                Some(outcome) if outcome.is_outcome() => (finished.stage, outcome),
                Some(_) => return,
            }
        } else {
            return;
        };
        if let Some(i) = task::STAGES.iter().position(|s| *s == name) {
            self.stages[i] = state;
        }
    }

    /// Each stage's full name with its state, in the order the stages run.
    pub fn stages(&self) -> impl Iterator<Item = (&'static str, StageState)> + '_ {
        task::STAGES
            .iter()
            .copied()
            .zip(self.stages.iter().copied())
    }

    /// The step that started last (the running one, else the last that ran); of steps
    /// started in the same millisecond, the later one.
    pub fn latest_started(&self) -> Option<usize> {
        self.steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.started_at.map(|at| (i, at.timestamp_millis())))
            .max_by_key(|(_, at)| *at)
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests;
