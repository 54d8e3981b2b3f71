//! `moonmind.task.execute`: every step in order, fail fast. A step is one CLI invocation,
//! from its prompt to its `task.step.*` events, its log and its patch.

use std::time::Duration;

use std::time::Instant;

use contract::events::{
    StepCancelled, StepEnd, StepFailed, StepFinished, StepLog, StepStarted, StepsPlan, TaskEvent,
    Warning,
};
use contract::job::task;
use contract::{EventLevel, ResolvedStep, StageState, StepUsage, limits};
use serde_json::Value;

use super::{Log, Report, Run, TaskOutcome};
use crate::process::{self, Ended};
use crate::publish;
use crate::runtime::{self, Progress, Reader, StepRun};
use crate::workspace::Workspace;

/// The most of an agent's final message a step's summary keeps.
const SUMMARY_CHARS: usize = 500;

enum StepEnded {
    Succeeded,
    Failed(String),
    Cancelled(Duration),
}

impl Run<'_> {
    pub(super) async fn execute(&mut self, steps: &[ResolvedStep]) -> Result<(), TaskOutcome> {
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
        let plan = StepsPlan {
            count: steps.len(),
            step_ids: steps.iter().map(|s| s.id.clone()).collect(),
        };
        self.event(EventLevel::Info, &format!("{} step(s)", steps.len()), &plan);
        for step in steps {
            if self.cancel.is_cancelled() {
                self.artifact(log);
                self.stage_finished(STAGE, StageState::Cancelled, started);
                return Err(TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
                });
            }
            match self.step(&ws, step, steps.len(), &mut log).await {
                StepEnded::Succeeded => {}
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
        }
        self.artifact(log);
        self.stage_finished(STAGE, StageState::Succeeded, started);
        Ok(())
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
                };
                let message = "stopped before the agent started";
                self.event(EventLevel::Warn, message, &cancelled);
                return StepEnded::Cancelled(Duration::ZERO);
            }
            Err(e) => return failed(self, e.to_string(), &usage),
        };
        let prompt = contract::prompt(self.task, step, total);
        let runtime = &self.task.payload.task.runtime;
        let invocation = runtime::invocation(
            &self.config.binaries,
            &StepRun {
                runtime,
                prompt: &prompt,
                repo: &ws.repo,
                home: &ws.home,
                endpoint: self.config.endpoints.get(runtime.mode),
            },
        );
        let mut log = Log::open(ws, task::step_log(step.index));
        for note in &invocation.notes {
            log.line(self.redactor, note);
            let warning = Warning {
                step: Some(step.into()),
                ..Warning::default()
            };
            self.event(EventLevel::Warn, note, &warning);
        }
        let mut verdict: Option<(bool, Option<String>)> = None;
        let mut last_message: Option<String> = None;
        let mut reader = Reader::new(runtime.mode);
        let ended = {
            let redactor = self.redactor;
            let reports = self.reports.clone();
            let index = step.index;
            let mut take = |progress: Vec<Progress>, shown: Vec<String>| {
                for progress in progress {
                    match progress {
                        Progress::Message(text) => last_message = Some(text),
                        Progress::Usage(more) => usage = usage + more,
                        Progress::Finished { ok, summary } => verdict = Some((ok, summary)),
                        Progress::Piece(_) | Progress::Action(_) | Progress::Error(_) => {}
                    }
                }
                for text in shown {
                    let _ = reports.send(Report::Event {
                        kind: StepLog::KIND.into(),
                        level: EventLevel::Info,
                        message: redactor.redact_and_cut(&text, limits::EVENT_MESSAGE_BYTES),
                        payload: Value::Object(StepLog { step_index: index }.payload()),
                    });
                }
            };
            let ended = process::run(&invocation, self.config.limits, self.cancel, |_, line| {
                log.line(redactor, line);
                stage_log.line(redactor, line);
                let (progress, shown) = reader.readable(line);
                take(progress, shown);
            })
            .await;
            let rest = reader.finish();
            let shown = rest.iter().filter_map(Progress::display).collect();
            take(rest, shown);
            ended
        };
        self.artifact(log);
        let budget = self.publish_budget(false);
        self.patch_artifact(ws, &task::step_patch(step.index), &before, &budget)
            .await;
        // Redacted whole, then cut: a secret cut in two would match no pattern.
        let summary = verdict
            .as_ref()
            .and_then(|(_, s)| s.clone())
            .or(last_message)
            .map(|s| {
                let clean = self.redactor.redact(&s);
                clean.chars().take(SUMMARY_CHARS).collect::<String>()
            });
        match ended {
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
                    },
                );
                StepEnded::Cancelled(stop)
            }
            Ok(Ended::Stopped {
                cancelled: false, ..
            }) => failed(
                self,
                format!("timed out after {} s", self.config.limits.timeout.as_secs()),
                &usage,
            ),
            Ok(Ended::Exited(status)) => {
                let ok = status.success() && verdict.as_ref().is_none_or(|(ok, _)| *ok);
                if ok {
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
