//! The completion loop (seed 003), the end of `moonmind.task.execute` for a task with a
//! check: run the check in the workspace; while it fails and iterations remain, run the
//! agent once more with the objective, the criteria and the end of the check's output,
//! then check again. Iteration 0 is the check of what the steps did. The task succeeds
//! when the check passes and fails once the last iteration's check has failed.

use std::time::{Duration, Instant};

use contract::events::{CheckResult, IterationFinished, IterationStarted};
use contract::job::task;
use contract::{Completion, EventLevel, StepState, StepUsage, limits};

use super::{Log, Run, TaskOutcome};
use crate::process::{self, Ended, Limits};
use crate::publish;
use crate::runtime::Invocation;
use crate::workspace::Workspace;

/// The most of a check's output kept to match its pattern against: the end of it.
const MATCHED_BYTES: usize = 1 << 20;
/// How many of the last output lines a failed task's error quotes.
const ERROR_LINES: usize = 20;

/// How one iteration ended short of a check.
enum Stopped {
    Failed(String),
    Cancelled(Duration),
}

impl Run<'_> {
    /// Runs the loop when the task has a check; `Ok` once it passes (or with no check).
    pub(super) async fn iterate(
        &mut self,
        ws: &Workspace,
        stage_log: &mut Log,
    ) -> Result<(), TaskOutcome> {
        const STAGE: &str = task::STAGE_EXECUTE;
        let Some(completion) = self.task.payload.task.completion.clone() else {
            return Ok(());
        };
        let Some(command) = completion.check().map(str::to_string) else {
            return Ok(());
        };
        let max = completion.max_iterations;
        let mut last_tail = String::new();
        // Resumed after iteration `start`: its work is restored, so the loop goes on by
        // checking it again, with no agent run first (as iteration 0 checks the steps').
        let start = self
            .restore
            .and_then(|r| r.checkpoint.after_iteration)
            .unwrap_or(0)
            .min(max);
        for n in start..=max {
            if self.cancel.is_cancelled() {
                return Err(TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
                });
            }
            if n > start && !self.cancel.is_cancelled() {
                self.pause_if_spent(stage_log);
            }
            if n > start && self.pause.is_requested() {
                stage_log.line(self.redactor, "paused on request before the next iteration");
                return Err(TaskOutcome::Paused { stage: STAGE });
            }
            let started = IterationStarted {
                iteration: n,
                max_iterations: max,
            };
            let message = if n == 0 {
                format!("checking the steps' work: {command}")
            } else if n == start {
                format!("iteration {n}/{max}: checking the restored work again: {command}")
            } else {
                format!("iteration {n}/{max}: the agent runs again, then the check")
            };
            self.event(EventLevel::Info, &message, &started);
            let mut usage = StepUsage::default();
            let mut summary = None;
            if n > start {
                match self
                    .agent_again(ws, &completion, n, &last_tail, stage_log)
                    .await
                {
                    Ok((used, said)) => {
                        (usage, summary) = (used, said);
                        if let Some(saved) = self.iteration_checkpoint(n) {
                            self.checkpoint(ws, saved).await;
                        }
                    }
                    Err((stopped, used)) => return Err(self.stopped_short(n, max, stopped, used)),
                }
            }
            let check = match self.check(ws, &completion, &command, n, stage_log).await {
                Ok(check) => check,
                Err(stopped) => return Err(self.stopped_short(n, max, stopped, usage)),
            };
            let passed = check.passed;
            last_tail = check.output_tail.clone();
            let verdict = check.verdict();
            let finished = IterationFinished {
                iteration: n,
                max_iterations: max,
                outcome: StepState::Succeeded,
                check: Some(check),
                summary,
                usage: Some(usage).filter(|u| !u.is_empty()),
            };
            let level = if passed {
                EventLevel::Info
            } else {
                EventLevel::Warn
            };
            self.event(level, &format!("iteration {n}/{max}: {verdict}"), &finished);
            if passed {
                return Ok(());
            }
        }
        let quoted: Vec<&str> = last_tail.lines().collect();
        let quoted = quoted[quoted.len().saturating_sub(ERROR_LINES)..].join("\n");
        let message = format!(
            "the completion check still fails after {max} iteration(s): {command}\n{quoted}"
        );
        Err(TaskOutcome::Failed {
            stage: STAGE,
            message: self
                .redactor
                .redact_and_cut(&message, limits::REPORTED_TEXT_BYTES),
        })
    }

    /// Reports iteration `n` ended before its check had a verdict; how the task ends.
    fn stopped_short(&self, n: u32, max: u32, stopped: Stopped, usage: StepUsage) -> TaskOutcome {
        const STAGE: &str = task::STAGE_EXECUTE;
        let (outcome, why, level, result) = match stopped {
            Stopped::Failed(why) => (
                StepState::Failed,
                why.clone(),
                EventLevel::Error,
                TaskOutcome::Failed {
                    stage: STAGE,
                    message: why,
                },
            ),
            Stopped::Cancelled(stop) => (
                StepState::Cancelled,
                "stopped on request".to_string(),
                EventLevel::Warn,
                TaskOutcome::Cancelled { stage: STAGE, stop },
            ),
        };
        let finished = IterationFinished {
            iteration: n,
            max_iterations: max,
            outcome,
            check: None,
            summary: Some(why.clone()),
            usage: Some(usage).filter(|u| !u.is_empty()),
        };
        self.event(level, &format!("iteration {n}/{max}: {why}"), &finished);
        result
    }

    /// Iteration `n`'s agent run: what it used and said, or how it stopped short.
    async fn agent_again(
        &mut self,
        ws: &Workspace,
        completion: &Completion,
        n: u32,
        check_tail: &str,
        stage_log: &mut Log,
    ) -> Result<(StepUsage, Option<String>), (Stopped, StepUsage)> {
        let none = StepUsage::default();
        let before = match publish::snapshot(&ws.repo, &self.publish_budget(true)).await {
            Ok(tree) => tree,
            Err(e) if e.is_cancelled() => return Err((Stopped::Cancelled(Duration::ZERO), none)),
            Err(e) => return Err((Stopped::Failed(e.to_string()), none)),
        };
        let prompt = contract::iteration_prompt(&self.task, completion, n, check_tail);
        let clock = self.agent_clock();
        let invoked = self
            .invoke(ws, &prompt, task::iteration_log(n), None, stage_log)
            .await;
        let usage = clock.stop(invoked.usage);
        let budget = self.publish_budget(false);
        self.patch_artifact(ws, &task::iteration_patch(n), &before, &budget)
            .await;
        let failed = |why: String| {
            let why = self
                .redactor
                .redact_and_cut(&why, limits::REPORTED_TEXT_BYTES);
            (Stopped::Failed(why), usage)
        };
        match invoked.ended {
            Err(e) => Err(failed(e.to_string())),
            Ok(Ended::Stopped {
                cancelled: true,
                stop,
                ..
            }) => Err((Stopped::Cancelled(stop), usage)),
            Ok(Ended::Stopped { .. }) => Err(failed(format!(
                "the agent timed out after {} s",
                self.config.limits.timeout.as_secs()
            ))),
            Ok(Ended::Exited(status)) if !invoked.succeeded => {
                Err(failed(invoked.summary.unwrap_or_else(|| {
                    format!("the agent exited with {status}")
                })))
            }
            Ok(Ended::Exited(_)) => Ok((usage, invoked.summary)),
        }
    }

    /// Runs the check once, under the process policy, its output logged (redacted).
    async fn check(
        &mut self,
        ws: &Workspace,
        completion: &Completion,
        command: &str,
        n: u32,
        stage_log: &mut Log,
    ) -> Result<CheckResult, Stopped> {
        let invocation = Invocation {
            env: vec![("HOME".into(), ws.home.display().to_string())],
            ..Invocation::plain(
                "bash".into(),
                vec!["-c".into(), command.into()],
                ws.repo.clone(),
            )
        };
        let invocation = self.config.sandbox.wrap(invocation, ws);
        let limits = Limits {
            timeout: completion.timeout(),
            grace: self.config.limits.grace,
        };
        let mut log = Log::open(ws, task::check_log(n));
        let mut output = String::new();
        let began = Instant::now();
        let ended = {
            let redactor = self.redactor;
            process::run(&invocation, limits, self.cancel, |_, line| {
                log.line(redactor, line);
                stage_log.line(redactor, line);
                output.push_str(line);
                output.push('\n');
                if output.len() > 2 * MATCHED_BYTES {
                    output = tail(&output, MATCHED_BYTES).to_string();
                }
            })
            .await
        };
        self.artifact(log);
        let duration_ms = began.elapsed().as_millis() as u64;
        let output = self.redactor.redact(tail(&output, MATCHED_BYTES));
        let output_tail = tail(&output, limits::CHECK_OUTPUT_TAIL_BYTES).to_string();
        let pattern_matched = completion.output_pattern.as_deref().map(|pattern| {
            regex::RegexBuilder::new(pattern)
                .multi_line(true)
                .build()
                .is_ok_and(|re| re.is_match(&output))
        });
        match ended {
            Err(e) => Err(Stopped::Failed(format!(
                "the completion check could not run: {e}"
            ))),
            Ok(Ended::Stopped {
                cancelled: true,
                stop,
                ..
            }) => Err(Stopped::Cancelled(stop)),
            Ok(Ended::Stopped { .. }) => Ok(CheckResult {
                passed: false,
                exit_code: None,
                timed_out: true,
                pattern_matched,
                output_tail,
                duration_ms,
            }),
            Ok(Ended::Exited(status)) => Ok(CheckResult {
                passed: status.success() && pattern_matched != Some(false),
                exit_code: status.code(),
                timed_out: false,
                pattern_matched,
                output_tail,
                duration_ms,
            }),
        }
    }
}

/// The last `bytes` of `text` at most, starting on a character.
fn tail(text: &str, bytes: usize) -> &str {
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
