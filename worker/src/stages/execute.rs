//! `moonmind.task.execute`: every step in order, fail fast, then the completion loop when
//! the task has a check (`iterate.rs`). A step is one CLI invocation (`invoke.rs`), from
//! its prompt to its `task.step.*` events, its log and its patch. Steps appended to the
//! job while it runs are read at each step boundary and run after the others.

use std::time::Duration;

use std::time::Instant;

use contract::events::{StepCancelled, StepEnd, StepFailed, StepFinished, StepStarted, StepsPlan};
use contract::job::task;
use contract::{EventLevel, ResolvedStep, StageState, StepUsage, limits};

use super::{Log, Run, TaskOutcome};
use crate::process::Ended;
use crate::publish;
use crate::workspace::Workspace;

enum StepEnded {
    Succeeded,
    Failed(String),
    Cancelled(Duration),
}

impl Run<'_> {
    /// Runs the task's steps from the one at index `from` (the earlier ones were
    /// restored), and the steps appended while they run.
    pub(super) async fn execute(&mut self, from: usize) -> Result<(), TaskOutcome> {
        const STAGE: &str = task::STAGE_EXECUTE;
        let ws = self.ws.clone().expect("prepare made the workspace");
        let started = Instant::now();
        if self.cancel.is_cancelled() {
            return Err(TaskOutcome::Cancelled {
                stage: task::STAGE_PREPARE,
                stop: Duration::ZERO,
            });
        }
        self.stage_started(STAGE);
        let mut log = Log::open(&ws, task::stage_log(STAGE));
        let mut steps = self.task.resolved_steps();
        self.plan(&steps);
        self.round_started(from);
        if from > 0 {
            log.line(
                self.redactor,
                &format!("steps 1 to {from} were restored from the checkpoint"),
            );
        }
        let mut next = from;
        loop {
            // Steps appended meanwhile join the plan here, at a boundary. Past the last
            // step, the read waits until that step's end has reached the queue, which then
            // takes no more: what it finds is all there will be.
            let last = next >= steps.len();
            if let Err(message) = self.take_appended(&ws, &mut steps, last, &mut log).await {
                self.artifact(log);
                self.stage_finished(STAGE, StageState::Failed, started);
                return Err(TaskOutcome::Failed {
                    stage: STAGE,
                    message,
                });
            }
            let Some(step) = steps.get(next).cloned() else {
                break;
            };
            if !self.cancel.is_cancelled() {
                self.pause_if_spent(&mut log);
            }
            if self.pause.is_requested() && !self.cancel.is_cancelled() {
                return Err(self.pause_here(log, started));
            }
            if self.cancel.is_cancelled() {
                self.artifact(log);
                self.stage_finished(STAGE, StageState::Cancelled, started);
                return Err(TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
                });
            }
            match self.step(&ws, &step, steps.len(), &mut log).await {
                StepEnded::Succeeded => {
                    if let Some(saved) = self.step_checkpoint(step.index) {
                        self.checkpoint(&ws, saved).await;
                    }
                }
                StepEnded::Failed(message) => {
                    self.artifact(log);
                    self.stage_finished(STAGE, StageState::Failed, started);
                    return Err(TaskOutcome::Failed {
                        stage: STAGE,
                        message,
                    });
                }
                StepEnded::Cancelled(stop) => {
                    self.artifact(log);
                    self.stage_finished(STAGE, StageState::Cancelled, started);
                    return Err(TaskOutcome::Cancelled { stage: STAGE, stop });
                }
            }
            next += 1;
        }
        // A task with a completion check loops until it passes, within the same stage.
        let looped = self.iterate(&ws, &mut log).await;
        self.artifact(log);
        let state = match &looped {
            Ok(()) => StageState::Succeeded,
            Err(TaskOutcome::Cancelled { .. } | TaskOutcome::Paused { .. }) => {
                StageState::Cancelled
            }
            Err(_) => StageState::Failed,
        };
        self.stage_finished(STAGE, state, started);
        looped
    }

    /// `task.round.started`, when a follow-up round's run begins at its first step.
    fn round_started(&self, from: usize) {
        let rounds = &self.task.payload.task.rounds;
        let Some(round) = rounds.last().filter(|r| r.from_step == from) else {
            return;
        };
        let steps = self.task.resolved_steps().len().saturating_sub(from);
        let started = contract::events::RoundStarted {
            round: round.round,
            from_step_index: from,
            steps,
        };
        let message = format!(
            "round {}: {steps} step(s) from step {}",
            round.round,
            from + 1
        );
        self.event(EventLevel::Info, &message, &started);
    }

    /// `task.round.finished`, when a follow-up round's run ended (not when it paused, waits
    /// for approval or was stopped: the round goes on).
    pub(super) fn round_finished(&self, outcome: &TaskOutcome) {
        let round = self.task.payload.task.round();
        let state = match outcome {
            _ if round < 2 => return,
            TaskOutcome::Succeeded { .. } => contract::StepState::Succeeded,
            TaskOutcome::Failed { .. } => contract::StepState::Failed,
            _ => return,
        };
        let finished = contract::events::RoundFinished {
            round,
            outcome: state,
        };
        self.event(
            EventLevel::Info,
            &format!("round {round} {}", state.as_str()),
            &finished,
        );
    }

    /// `task.steps.plan`: the steps the stage runs, again whenever steps are appended.
    fn plan(&self, steps: &[ResolvedStep]) {
        let plan = StepsPlan {
            count: steps.len(),
            step_ids: steps.iter().map(|s| s.id.clone()).collect(),
        };
        self.event(EventLevel::Info, &format!("{} step(s)", steps.len()), &plan);
    }

    /// Reads the job's task again and takes the steps appended to it since `steps`: they
    /// join the plan, and their skills are made ready. `settled`: the read after the last
    /// step (see [`super::Hold::latest_task`]). `Err` when a new step's skill cannot run
    /// here.
    async fn take_appended(
        &mut self,
        ws: &Workspace,
        steps: &mut Vec<ResolvedStep>,
        settled: bool,
        log: &mut Log,
    ) -> Result<(), String> {
        let Some(latest) = self.hold.latest_task(settled).await else {
            return Ok(());
        };
        // An operator may have raised it meanwhile.
        self.budget = latest.payload.task.budget;
        let now = latest.resolved_steps();
        // The queue only ever appends; a task that reads otherwise is not taken.
        let appended_only = now.len() > steps.len()
            && now
                .iter()
                .zip(steps.iter())
                .all(|(new, old)| new.id == old.id);
        if !appended_only {
            return Ok(());
        }
        let added = now.len() - steps.len();
        log.line(
            self.redactor,
            &format!("{added} step(s) appended: {} in all", now.len()),
        );
        let known = self.task.skills();
        let new_skills: Vec<String> = latest
            .skills()
            .into_iter()
            .filter(|id| !known.contains(id))
            .collect();
        self.task = std::borrow::Cow::Owned(latest);
        *steps = now;
        self.plan(steps);
        if !new_skills.is_empty() {
            self.ready_skills(ws, &new_skills, log)?;
        }
        Ok(())
    }

    /// Stops the stage at a boundary for a pause: nothing is lost, the latest checkpoint
    /// holds the work.
    fn pause_here(&self, mut log: Log, started: Instant) -> TaskOutcome {
        log.line(
            self.redactor,
            "paused on request; the latest checkpoint keeps the work",
        );
        self.artifact(log);
        self.stage_finished(task::STAGE_EXECUTE, StageState::Cancelled, started);
        TaskOutcome::Paused {
            stage: task::STAGE_EXECUTE,
        }
    }

    async fn step(
        &mut self,
        ws: &Workspace,
        step: &ResolvedStep,
        total: usize,
        stage_log: &mut Log,
    ) -> StepEnded {
        let label = step.title.clone().unwrap_or_else(|| step.id.clone());
        let message = format!("step {}/{total}: {label}", step.index + 1);
        self.event(
            EventLevel::Info,
            &message,
            &StepStarted { step: step.into() },
        );
        let mut usage = StepUsage::default();
        let failed = |run: &Run<'_>, message: String, usage: &StepUsage| {
            // The job's errorMessage is made of this: redacted here, not only in the event.
            let message = run
                .redactor
                .redact_and_cut(&message, limits::REPORTED_TEXT_BYTES);
            let end = StepEnd::new(step.into(), Some(message.clone()), usage);
            run.event(EventLevel::Error, &message, &StepFailed(end));
            StepEnded::Failed(message)
        };
        let before = match publish::snapshot(&ws.repo, &self.publish_budget(true)).await {
            Ok(tree) => tree,
            Err(e) if e.is_cancelled() => {
                let cancelled = StepCancelled {
                    step: step.into(),
                    stop_ms: 0,
                    killed: false,
                    usage: None,
                };
                let message = "stopped before the agent started";
                self.event(EventLevel::Warn, message, &cancelled);
                return StepEnded::Cancelled(Duration::ZERO);
            }
            Err(e) => return failed(self, e.to_string(), &usage),
        };
        let container = self.task.payload.task.container.enabled;
        let timeout = if container {
            self.task.payload.task.container.timeout_seconds()
        } else {
            self.config.limits.timeout.as_secs()
        };
        let clock = self.agent_clock();
        let invoked = if container {
            match self.run_container(ws, step, stage_log).await {
                Ok(invoked) => invoked,
                Err(message) => return failed(self, message, &usage),
            }
        } else {
            let prompt = contract::prompt(&self.task, step, total);
            self.invoke(
                ws,
                &prompt,
                task::step_log(step.index),
                Some(step),
                stage_log,
            )
            .await
        };
        usage = clock.stop(invoked.usage);
        // Before any git of the worker's looks at what the step left (its patch first).
        if let Err(nested) = crate::git::refuse_nested_repositories(&ws.repo) {
            return failed(self, nested.to_string(), &usage);
        }
        let budget = self.publish_budget(false);
        self.patch_artifact(ws, &task::step_patch(step.index), &before, &budget)
            .await;
        let summary = invoked.summary;
        match invoked.ended {
            Err(e) => failed(self, e.to_string(), &usage),
            Ok(Ended::Stopped {
                cancelled: true,
                stop,
                killed,
            }) => {
                self.event(
                    EventLevel::Warn,
                    &format!(
                        "stopped in {} ms{}",
                        stop.as_millis(),
                        if killed {
                            " (killed after the grace period)"
                        } else {
                            ""
                        }
                    ),
                    &StepCancelled {
                        step: step.into(),
                        stop_ms: stop.as_millis() as u64,
                        killed,
                        usage: Some(usage),
                    },
                );
                StepEnded::Cancelled(stop)
            }
            Ok(Ended::Stopped {
                cancelled: false, ..
            }) => failed(self, format!("timed out after {timeout} s"), &usage),
            Ok(Ended::Exited(status)) => {
                if invoked.succeeded {
                    self.event(
                        EventLevel::Info,
                        &format!("step {}/{total} finished", step.index + 1),
                        &StepFinished(StepEnd::new(step.into(), summary, &usage)),
                    );
                    StepEnded::Succeeded
                } else {
                    let why = summary.unwrap_or_else(|| format!("the agent exited with {status}"));
                    failed(self, why, &usage)
                }
            }
        }
    }
}
