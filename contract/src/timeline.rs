//! The timeline fold: a job's events read as the state of each step and stage. It lives in
//! the contract so every reader of a job (the dashboard on the server and in the browser,
//! the CLI, MCP) tells the same story from the same events.
//!
//! The fold is lenient where the worker is concerned: an event of another kind, for a step
//! the task does not have, or for a stage it does not know, changes nothing, so one odd
//! event never hides the rest of the timeline. A stage's end names its `outcome`; an end
//! without one is a success (how workers before the outcome reported it), and an outcome
//! outside [`StageState`] leaves the stage as it was.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::job::{JobEvent, task};
use crate::modes::ParseModeError;
use crate::usage::StepUsage;

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

impl StepState {
    pub const ALL: [StepState; 5] = [
        StepState::Pending,
        StepState::Running,
        StepState::Succeeded,
        StepState::Failed,
        StepState::Cancelled,
    ];
    const NAMES: [&'static str; 5] = ["pending", "running", "succeeded", "failed", "cancelled"];

    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::Running => "running",
            StepState::Succeeded => "succeeded",
            StepState::Failed => "failed",
            StepState::Cancelled => "cancelled",
        }
    }

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

impl StageState {
    pub const ALL: [StageState; 6] = [
        StageState::Pending,
        StageState::Running,
        StageState::Succeeded,
        StageState::Failed,
        StageState::Skipped,
        StageState::Cancelled,
    ];
    const NAMES: [&'static str; 6] = [
        "pending",
        "running",
        "succeeded",
        "failed",
        "skipped",
        "cancelled",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StageState::Pending => "pending",
            StageState::Running => "running",
            StageState::Succeeded => "succeeded",
            StageState::Failed => "failed",
            StageState::Skipped => "skipped",
            StageState::Cancelled => "cancelled",
        }
    }

    /// A finished stage's `outcome`; the running and pending states are no outcome.
    fn of_outcome(outcome: &str) -> Option<StageState> {
        Self::ALL
            .into_iter()
            .filter(|s| !matches!(s, StageState::Pending | StageState::Running))
            .find(|s| s.as_str() == outcome)
    }
}

/// Parses the wire names of [`StepState`] and [`StageState`].
macro_rules! from_name {
    ($state:ident, $kind:literal) => {
        impl FromStr for $state {
            type Err = ParseModeError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $state::ALL
                    .into_iter()
                    .find(|state| state.as_str() == s)
                    .ok_or_else(|| ParseModeError {
                        kind: $kind,
                        value: s.to_string(),
                        accepted: &$state::NAMES,
                    })
            }
        }

        impl TryFrom<String> for $state {
            type Error = ParseModeError;

            fn try_from(name: String) -> Result<Self, Self::Error> {
                name.parse()
            }
        }
    };
}

from_name!(StepState, "step state");
from_name!(StageState, "stage state");

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
        let Some(step) = step_index(event).and_then(|i| self.steps.get_mut(i)) else {
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
        let Some(name) = event.payload.get("stage").and_then(|s| s.as_str()) else {
            return;
        };
        let Some(i) = task::STAGES.iter().position(|s| *s == name) else {
            return;
        };
        let state = match event.kind.as_str() {
            task::STAGE_STARTED => StageState::Running,
            task::STAGE_FINISHED => match event.payload.get("outcome").and_then(|o| o.as_str()) {
                None => StageState::Succeeded,
                Some(outcome) => match StageState::of_outcome(outcome) {
                    Some(state) => state,
                    None => return,
                },
            },
            _ => return,
        };
        self.stages[i] = state;
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

/// The step a step event (a log line too) is about: its payload's `stepIndex`.
pub fn step_index(event: &JobEvent) -> Option<usize> {
    let index = event.payload.get("stepIndex")?.as_u64()?;
    usize::try_from(index).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::job::EventLevel;

    fn at(second: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_767_225_600 + second, 0).unwrap()
    }

    fn event(id: i64, kind: &str, payload: Value, second: i64) -> JobEvent {
        JobEvent {
            id,
            job_id: "j1".into(),
            kind: kind.into(),
            level: EventLevel::Info,
            message: String::new(),
            payload: payload.as_object().cloned().unwrap_or_default(),
            created_at: at(second),
        }
    }

    fn step(id: i64, kind: &str, index: usize, second: i64) -> JobEvent {
        event(id, kind, json!({ "stepIndex": index }), second)
    }

    fn states(timeline: &Timeline) -> Vec<StepState> {
        timeline.steps.iter().map(|s| s.state).collect()
    }

    #[test]
    fn a_task_without_events_has_every_step_and_stage_pending() {
        let timeline = Timeline::from_events(2, &[]);
        assert_eq!(states(&timeline), [StepState::Pending; 2]);
        assert_eq!(timeline.stages, [StageState::Pending; 3]);
        assert_eq!(timeline.latest_started(), None);
        assert_eq!(timeline.steps[0].duration_ms(0), None);
    }

    #[test]
    fn each_step_event_moves_its_step_and_no_other() {
        let events = [
            step(1, task::STEP_STARTED, 0, 1),
            step(2, task::STEP_FINISHED, 0, 4),
            step(3, task::STEP_STARTED, 1, 5),
            step(4, task::STEP_FAILED, 1, 6),
            step(5, task::STEP_STARTED, 2, 7),
            step(6, task::STEP_CANCELLED, 2, 8),
        ];
        let timeline = Timeline::from_events(4, &events);
        assert_eq!(
            states(&timeline),
            [
                StepState::Succeeded,
                StepState::Failed,
                StepState::Cancelled,
                StepState::Pending
            ]
        );
        assert_eq!(timeline.steps[0].duration_ms(0), Some(3_000));
    }

    #[test]
    fn a_running_step_lasts_until_now() {
        let timeline = Timeline::from_events(1, &[step(1, task::STEP_STARTED, 0, 5)]);
        let now = at(7).timestamp_millis();
        assert_eq!(timeline.steps[0].state, StepState::Running);
        assert_eq!(timeline.steps[0].duration_ms(now), Some(2_000));
    }

    #[test]
    fn a_retried_step_starts_over_and_forgets_its_last_run() {
        let used = json!({ "stepIndex": 0, "usage": { "outputTokens": 5 } });
        let events = [
            step(1, task::STEP_STARTED, 0, 1),
            event(2, task::STEP_FAILED, used, 2),
            step(3, task::STEP_STARTED, 0, 10),
        ];
        let mut timeline = Timeline::from_events(1, &events[..2]);
        assert_eq!(
            timeline.steps[0].usage.and_then(|u| u.output_tokens),
            Some(5)
        );
        timeline.apply(&events[2]);
        let retried = &timeline.steps[0];
        assert_eq!(retried.state, StepState::Running);
        assert_eq!((retried.started_at, retried.ended_at), (Some(at(10)), None));
        assert_eq!(retried.usage, None);
        assert_eq!(retried.duration_ms(at(13).timestamp_millis()), Some(3_000));
    }

    #[test]
    fn an_end_never_seen_starting_has_a_state_but_no_duration() {
        let timeline = Timeline::from_events(1, &[step(1, task::STEP_FINISHED, 0, 3)]);
        assert_eq!(timeline.steps[0].state, StepState::Succeeded);
        assert_eq!(timeline.steps[0].duration_ms(0), None);
    }

    #[test]
    fn a_usage_the_queue_would_refuse_is_not_shown() {
        let refused = json!({ "stepIndex": 0, "usage": { "costUsd": -1.0 } });
        let timeline = Timeline::from_events(1, &[event(1, task::STEP_FINISHED, refused, 1)]);
        assert_eq!(timeline.steps[0].state, StepState::Succeeded);
        assert_eq!(timeline.steps[0].usage, None);
    }

    #[test]
    fn events_for_steps_the_task_lacks_or_of_other_kinds_change_nothing() {
        let events = [
            step(1, task::STEP_STARTED, 5, 1),
            event(2, task::STEP_STARTED, json!({ "stepIndex": "0" }), 1),
            event(3, task::STEP_STARTED, json!({}), 1),
            step(4, task::STEP_LOG, 0, 1),
            step(5, task::WARNING, 0, 1),
            event(6, task::STEPS_PLAN, json!({ "count": 1 }), 1),
        ];
        let timeline = Timeline::from_events(1, &events);
        assert_eq!(timeline, Timeline::from_events(1, &[]));
    }

    #[test]
    fn stages_follow_their_start_and_the_outcome_of_their_end() {
        let stage = |id, kind, payload| event(id, kind, payload, 1);
        let events = [
            stage(
                1,
                task::STAGE_STARTED,
                json!({ "stage": task::STAGE_PREPARE }),
            ),
            stage(
                2,
                task::STAGE_FINISHED,
                json!({ "stage": task::STAGE_PREPARE, "outcome": "succeeded" }),
            ),
            stage(
                3,
                task::STAGE_STARTED,
                json!({ "stage": task::STAGE_EXECUTE }),
            ),
            stage(
                4,
                task::STAGE_FINISHED,
                json!({ "stage": task::STAGE_EXECUTE, "outcome": "cancelled" }),
            ),
            stage(
                5,
                task::STAGE_FINISHED,
                json!({ "stage": task::STAGE_PUBLISH, "outcome": "skipped" }),
            ),
        ];
        let timeline = Timeline::from_events(0, &events);
        let stages: Vec<_> = timeline.stages().collect();
        assert_eq!(
            stages,
            [
                (task::STAGE_PREPARE, StageState::Succeeded),
                (task::STAGE_EXECUTE, StageState::Cancelled),
                (task::STAGE_PUBLISH, StageState::Skipped),
            ]
        );
    }

    #[test]
    fn a_stage_end_without_an_outcome_succeeded_and_an_unknown_one_is_ignored() {
        let stage = |id, kind, payload| event(id, kind, payload, 1);
        let events = [
            stage(
                1,
                task::STAGE_STARTED,
                json!({ "stage": task::STAGE_PREPARE }),
            ),
            stage(
                2,
                task::STAGE_FINISHED,
                json!({ "stage": task::STAGE_PREPARE }),
            ),
            stage(
                3,
                task::STAGE_STARTED,
                json!({ "stage": task::STAGE_EXECUTE }),
            ),
            stage(
                4,
                task::STAGE_FINISHED,
                json!({ "stage": task::STAGE_EXECUTE, "outcome": "exploded" }),
            ),
            stage(
                5,
                task::STAGE_STARTED,
                json!({ "stage": "moonmind.task.unknown" }),
            ),
        ];
        let timeline = Timeline::from_events(0, &events);
        assert_eq!(
            timeline.stages,
            [
                StageState::Succeeded,
                StageState::Running,
                StageState::Pending
            ]
        );
    }

    #[test]
    fn the_latest_started_step_is_the_one_whose_output_matters() {
        let events = [
            step(1, task::STEP_STARTED, 0, 1),
            step(2, task::STEP_FINISHED, 0, 2),
            step(3, task::STEP_STARTED, 1, 3),
            step(4, task::STEP_FINISHED, 1, 4),
            // A retry runs the first step again: it is the latest now.
            step(5, task::STEP_STARTED, 0, 5),
        ];
        assert_eq!(
            Timeline::from_events(2, &events[..4]).latest_started(),
            Some(1)
        );
        assert_eq!(Timeline::from_events(2, &events).latest_started(), Some(0));
        let same_time = [
            step(1, task::STEP_STARTED, 0, 1),
            step(2, task::STEP_STARTED, 1, 1),
        ];
        assert_eq!(
            Timeline::from_events(2, &same_time).latest_started(),
            Some(1)
        );
    }

    #[test]
    fn states_travel_as_their_names() {
        for (i, state) in StepState::ALL.into_iter().enumerate() {
            assert_eq!(state.as_str(), StepState::NAMES[i]);
            assert_eq!(serde_json::to_value(state).unwrap(), json!(state.as_str()));
            assert_eq!(
                serde_json::from_value::<StepState>(json!(state.as_str())).unwrap(),
                state
            );
        }
        for (i, state) in StageState::ALL.into_iter().enumerate() {
            assert_eq!(state.as_str(), StageState::NAMES[i]);
            assert_eq!(serde_json::to_value(state).unwrap(), json!(state.as_str()));
            assert_eq!(
                serde_json::from_value::<StageState>(json!(state.as_str())).unwrap(),
                state
            );
        }
        assert!(serde_json::from_value::<StepState>(json!("Running")).is_err());
        let timeline = Timeline::from_events(1, &[step(1, task::STEP_STARTED, 0, 1)]);
        let back: Timeline =
            serde_json::from_value(serde_json::to_value(&timeline).unwrap()).unwrap();
        assert_eq!(back, timeline);
    }
}
