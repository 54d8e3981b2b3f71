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

use crate::events::{
    CheckResult, CheckpointSaved, IterationFinished, IterationStarted, LeaseHeld, StageFinished,
    StageStarted, StepIndex, TaskEvent, read_payload, reported_usage,
};
use crate::job::{JobEvent, events, task};
pub use crate::states::{StageState, StepState};
use crate::usage::StepUsage;

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

/// One iteration of the completion loop as its events tell it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationProgress {
    pub iteration: u32,
    pub max_iterations: u32,
    /// `succeeded` once it got as far as its check, which `check` says passed or not.
    pub state: StepState,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub check: Option<CheckResult>,
    pub usage: Option<StepUsage>,
}

impl IterationProgress {
    /// Where it is, in a few words: its check's verdict ("the check failed (exit code 1)"),
    /// else what it is doing ("the agent runs again") or how it ended.
    pub fn verdict(&self) -> String {
        match (&self.check, self.state) {
            (Some(check), _) => check.verdict(),
            (None, StepState::Running) if self.iteration == 0 => "checking the steps' work".into(),
            (None, StepState::Running) => "the agent runs again".into(),
            (None, state) => state.as_str().to_string(),
        }
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
    /// The completion loop's iterations, in order; none for a task without a check.
    #[serde(default)]
    pub iterations: Vec<IterationProgress>,
    /// The checkpoints saved, oldest first: the current attempt's, and those of earlier
    /// attempts up to the one it resumed from.
    #[serde(default)]
    pub checkpoints: Vec<Checkpoint>,
    /// Each claim of the job, in order.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// Where the next claim starts, as the latest pause, resume or retry said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_from: Option<CheckpointSaved>,
}

/// One attempt at the job: who claimed it, when, and where it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub attempt: u32,
    pub worker_id: Option<String>,
    pub claimed_at: DateTime<Utc>,
    /// The checkpoint it restored ("after step 2"); `None`: it started from scratch.
    pub resumed_from: Option<String>,
}

/// A checkpoint as the job lists it: where it was taken, and its patch.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// `step-1` (after the first step) or `iteration-2`.
    pub id: String,
    /// "after step 1".
    pub label: String,
    /// Where it was taken, its base commit and its patch's artifact, as the worker said.
    #[serde(flatten)]
    pub saved: CheckpointSaved,
    pub created_at: DateTime<Utc>,
}

impl Timeline {
    /// The timeline of a task of `step_count` steps after `events`, oldest first.
    pub fn from_events<'a>(
        step_count: usize,
        events: impl IntoIterator<Item = &'a JobEvent>,
    ) -> Timeline {
        let mut timeline = Timeline {
            steps: vec![StepProgress::default(); step_count],
            ..Timeline::default()
        };
        for event in events {
            timeline.apply(event);
        }
        timeline
    }

    /// Folds one more event in, as a live reader receives them.
    pub fn apply(&mut self, event: &JobEvent) {
        if event.kind == events::JOB_CLAIMED {
            self.claimed(event);
        } else if RESUME_POINTS.contains(&event.kind.as_str()) {
            // Where the next attempt starts, as the queue set it (its `resumeFrom`).
            if let Some(point) = event.payload.get("resumeFrom") {
                self.resume_from = CheckpointSaved::deserialize(point).ok();
            }
        } else if let Some(state) = state_after(&event.kind) {
            self.apply_step(event, state);
        } else if let Some(started) = IterationStarted::read(event) {
            let at = self.iteration(started.iteration);
            *at = IterationProgress {
                iteration: started.iteration,
                max_iterations: started.max_iterations,
                state: StepState::Running,
                started_at: Some(event.created_at),
                ..IterationProgress::default()
            };
        } else if let Some(saved) = CheckpointSaved::read(event) {
            let checkpoint = Checkpoint {
                id: saved.id(),
                label: saved.label(),
                saved,
                created_at: event.created_at,
            };
            // A step run again (a retry) saves its checkpoint again: the latest counts.
            self.checkpoints.retain(|c| c.id != checkpoint.id);
            self.checkpoints.push(checkpoint);
        } else if let Some(finished) = IterationFinished::read(event) {
            let usage = reported_usage(&event.kind, &event.payload).ok().flatten();
            let at = self.iteration(finished.iteration);
            at.iteration = finished.iteration;
            at.max_iterations = finished.max_iterations;
            at.state = finished.outcome;
            at.ended_at = Some(event.created_at);
            at.check = finished.check;
            at.usage = usage;
        } else {
            self.apply_stage(event);
        }
    }

    /// A new attempt: it starts from a fresh checkout, or from the checkpoint it resumes
    /// from. What came after that point no longer describes the work, so it goes: the
    /// later steps, iterations and checkpoints start over, and so do the stages.
    fn claimed(&mut self, event: &JobEvent) {
        let lease = read_payload::<LeaseHeld>(&event.payload);
        let resume = self.resume_from.clone();
        let from = match &resume {
            Some(saved) => {
                let id = saved.id();
                match self.checkpoints.iter().position(|c| c.id == id) {
                    Some(at) => self.checkpoints.truncate(at + 1),
                    None => {
                        self.checkpoints.clear();
                        self.checkpoints.push(Checkpoint {
                            id,
                            label: saved.label(),
                            saved: saved.clone(),
                            created_at: event.created_at,
                        });
                    }
                }
                let kept = saved.after_iteration.unwrap_or(0);
                self.iterations
                    .retain(|it| saved.after_iteration.is_some() && it.iteration <= kept);
                saved.resume_step(self.steps.len())
            }
            None => {
                self.checkpoints.clear();
                self.iterations.clear();
                0
            }
        };
        for step in self.steps.iter_mut().skip(from) {
            *step = StepProgress::default();
        }
        self.stages = Default::default();
        self.attempts.push(Attempt {
            attempt: lease
                .as_ref()
                .map(|l| l.attempt)
                .unwrap_or(self.attempts.len() as u32 + 1),
            worker_id: lease.and_then(|l| l.worker_id),
            claimed_at: event.created_at,
            resumed_from: resume.map(|saved| saved.label()),
        });
    }

    /// Iteration `n`, added in its place when first seen.
    fn iteration(&mut self, n: u32) -> &mut IterationProgress {
        let i = match self.iterations.binary_search_by_key(&n, |it| it.iteration) {
            Ok(i) => i,
            Err(i) => {
                let new = IterationProgress {
                    iteration: n,
                    ..IterationProgress::default()
                };
                self.iterations.insert(i, new);
                i
            }
        };
        &mut self.iterations[i]
    }

    /// The latest iteration, when the task has a completion loop that has begun.
    pub fn latest_iteration(&self) -> Option<&IterationProgress> {
        self.iterations.last()
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
        step.usage = reported_usage(&event.kind, &event.payload).ok().flatten();
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

/// The queue's events that set where a job's next attempt starts.
const RESUME_POINTS: [&str; 6] = [
    events::JOB_PAUSED,
    events::JOB_RESUMED,
    events::JOB_RETRY_REQUESTED,
    events::JOB_APPROVAL_REQUESTED,
    events::JOB_APPROVED,
    events::JOB_FOLLOW_UP_REQUESTED,
];

/// The state an event of `kind` moves its step into; `None` for a kind that does not
/// (a log line, the plan).
fn state_after(kind: &str) -> Option<StepState> {
    match kind {
        task::STEP_STARTED => Some(StepState::Running),
        task::STEP_FINISHED => Some(StepState::Succeeded),
        task::STEP_FAILED => Some(StepState::Failed),
        task::STEP_CANCELLED => Some(StepState::Cancelled),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
