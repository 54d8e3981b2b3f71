//! The execute stage's unit: one step, as one CLI invocation, from its prompt to its
//! `task.step.*` events, its log and its patch.

use std::time::Duration;

use contract::job::task;
use contract::{EventLevel, ResolvedStep, StepUsage, limits};
use serde_json::{Value, json};

use super::{Log, Report, Run};
use crate::process::{self, Ended};
use crate::publish;
use crate::runtime::{self, Progress, Reader, StepRun};
use crate::workspace::Workspace;

/// The most of an agent's final message a step's summary keeps.
const SUMMARY_CHARS: usize = 500;

pub(super) enum StepEnd {
    Succeeded,
    Failed(String),
    Cancelled(Duration),
}

impl Run<'_> {
    /// A step event's payload with the usage the CLI reported, when it reported any.
    fn with_usage(mut payload: Value, usage: &StepUsage) -> Value {
        if !usage.is_empty() {
            payload["usage"] = json!(usage);
        }
        payload
    }

    fn step_payload(step: &ResolvedStep, summary: Option<&str>) -> Value {
        let mut payload = json!({
            "stepIndex": step.index,
            "stepId": step.id,
            "effectiveSkill": step.effective_skill,
            "hasStepInstructions": step.has_step_instructions,
        });
        if let Some(summary) = summary {
            payload["summary"] = json!(summary);
        }
        payload
    }

    pub(super) async fn step(
        &mut self,
        ws: &Workspace,
        step: &ResolvedStep,
        total: usize,
        stage_log: &mut Log,
    ) -> StepEnd {
        let label = step.title.clone().unwrap_or_else(|| step.id.clone());
        self.event(
            task::STEP_STARTED,
            EventLevel::Info,
            &format!("step {}/{total}: {label}", step.index + 1),
            Self::step_payload(step, None),
        );
        let mut usage = StepUsage::default();
        let failed = |run: &Run<'_>, message: String, usage: &StepUsage| {
            // The job's errorMessage is made of this: redacted here, not only in the event.
            let message = run
                .redactor
                .redact_and_cut(&message, limits::REPORTED_TEXT_BYTES);
            run.event(
                task::STEP_FAILED,
                EventLevel::Error,
                &message,
                Self::with_usage(Self::step_payload(step, Some(&message)), usage),
            );
            StepEnd::Failed(message)
        };
        let before = match publish::snapshot(&ws.repo, &self.publish_budget(true)).await {
            Ok(tree) => tree,
            Err(e) if e.is_cancelled() => {
                let mut payload = Self::step_payload(step, None);
                payload["stopMs"] = json!(0);
                payload["killed"] = json!(false);
                let message = "stopped before the agent started";
                self.event(task::STEP_CANCELLED, EventLevel::Warn, message, payload);
                return StepEnd::Cancelled(Duration::ZERO);
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
            self.event(
                task::WARNING,
                EventLevel::Warn,
                note,
                Self::step_payload(step, None),
            );
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
                        kind: task::STEP_LOG.into(),
                        level: EventLevel::Info,
                        message: redactor.redact_and_cut(&text, limits::EVENT_MESSAGE_BYTES),
                        payload: json!({ "stepIndex": index }),
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
                    task::STEP_CANCELLED,
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
                    {
                        let mut p = Self::step_payload(step, None);
                        p["stopMs"] = json!(stop.as_millis() as u64);
                        p["killed"] = json!(killed);
                        p
                    },
                );
                StepEnd::Cancelled(stop)
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
                        task::STEP_FINISHED,
                        EventLevel::Info,
                        &format!("step {}/{total} finished", step.index + 1),
                        Self::with_usage(Self::step_payload(step, summary.as_deref()), &usage),
                    );
                    StepEnd::Succeeded
                } else {
                    let why = summary.unwrap_or_else(|| format!("the agent exited with {status}"));
                    failed(self, why, &usage)
                }
            }
        }
    }
}
