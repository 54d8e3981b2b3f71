//! One agent CLI invocation in the workspace, for a step or an iteration of the completion
//! loop alike: the prompt in, each output line to its log, the stage's log and (for a
//! step) the live tail, and what the CLI reported read as it comes.

use contract::events::Warning;
use contract::{EventLevel, ResolvedStep, StepUsage};

use super::{Log, Run, send_tail};
use crate::process::{self, Ended, RunError};
use crate::runtime::{self, Progress, Reader, StepRun};
use crate::workspace::Workspace;

/// The most of an agent's final message a summary keeps.
const SUMMARY_CHARS: usize = 500;

/// What one invocation came to.
pub(super) struct Invoked {
    pub ended: Result<Ended, RunError>,
    /// It exited by itself with success, and did not report failure.
    pub succeeded: bool,
    pub usage: StepUsage,
    /// Its final message (or result), redacted whole, then cut.
    pub summary: Option<String>,
}

impl Run<'_> {
    /// Runs the task's agent on `prompt`, its output logged to artifact `log_name`. For a
    /// step, `step` names it in the live tail and in warnings.
    pub(super) async fn invoke(
        &mut self,
        ws: &Workspace,
        prompt: &str,
        log_name: String,
        step: Option<&ResolvedStep>,
        stage_log: &mut Log,
    ) -> Invoked {
        let plan = self.session_plan(ws, self.task.payload.task.runtime.mode);
        let prompt = match plan.loss.clone() {
            Some((loss, previous)) => {
                self.session_restarted(ws, step, loss, previous, prompt)
                    .await
            }
            None => prompt.to_string(),
        };
        let runtime = &self.task.payload.task.runtime;
        let invocation = runtime::invocation(
            &self.config.binaries,
            &StepRun {
                runtime,
                prompt: &prompt,
                repo: &ws.repo,
                home: &ws.home,
                endpoint: self.config.endpoints.get(runtime.mode),
                sandboxed: self.config.sandbox.is_on(),
                session: &plan.arg,
            },
        );
        let mode = runtime.mode;
        let notes = invocation.notes.clone();
        let invocation = self.config.sandbox.wrap(invocation, ws);
        let mut log = Log::open(ws, log_name);
        for note in &notes {
            log.line(self.redactor, note);
            let warning = Warning {
                step: step.map(Into::into),
                ..Warning::default()
            };
            self.event(EventLevel::Warn, note, &warning);
        }
        let mut usage = StepUsage::default();
        let mut verdict: Option<(bool, Option<String>)> = None;
        let mut last_message: Option<String> = None;
        let mut said: Option<String> = None;
        let mut reader = Reader::new(mode);
        let ended = {
            let redactor = self.redactor;
            let reports = self.reports.clone();
            let index = step.map(|s| s.index);
            let mut take = |progress: Vec<Progress>, shown: Vec<String>| {
                for progress in progress {
                    match progress {
                        Progress::Message(text) => last_message = Some(text),
                        Progress::Usage(more) => usage = usage + more,
                        Progress::Session(id) => {
                            said.get_or_insert(id);
                        }
                        // A failure stands: a CLI that reported one (codex, of a command
                        // its own sandbox could not start) may still end its turn "done".
                        Progress::Finished { ok, summary } => {
                            if verdict.as_ref().is_none_or(|(ok, _)| *ok) {
                                verdict = Some((ok, summary));
                            }
                        }
                        Progress::Piece(_) | Progress::Action(_) | Progress::Error(_) => {}
                    }
                }
                let Some(index) = index else { return };
                for text in shown {
                    send_tail(&reports, redactor, index, &text);
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
        let usage = self.session_ran(ws, step, &plan, said, usage);
        let succeeded = matches!(&ended, Ok(Ended::Exited(status)) if status.success())
            && verdict.as_ref().is_none_or(|(ok, _)| *ok);
        // Redacted whole, then cut: a secret cut in two would match no pattern.
        let summary = verdict.and_then(|(_, s)| s).or(last_message).map(|s| {
            let clean = self.redactor.redact(&s);
            clean.chars().take(SUMMARY_CHARS).collect::<String>()
        });
        Invoked {
            ended,
            succeeded,
            usage,
            summary,
        }
    }
}
