//! One task run, stage by stage: `moonmind.task.prepare` (workspace, checkout, skills,
//! task_context.json), `moonmind.task.execute` (every step, in order, one CLI invocation
//! each, fail fast) and `moonmind.task.publish` (once, only after every step succeeded).
//!
//! What the run has to say goes out as [`Report`]s on a channel: events and finished
//! artifact files, already redacted. Whoever holds the other end sends them to the server
//! (the claim loop) or keeps them (tests); the stages never talk HTTP themselves.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use contract::job::task;
use contract::{EventLevel, NormalizedTask, ResolvedStep};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::git::{self, MirrorCache};
use crate::process::{self, Ended, Limits};
use crate::publish::{self, Identity, PublishRequest};
use crate::redact::Redactor;
use crate::runtime::{self, Binaries, Progress, StepRun};
use crate::workspace::Workspace;

/// Something the run reports, in the order it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Event {
        kind: String,
        level: EventLevel,
        message: String,
        payload: Value,
    },
    /// A finished artifact: `name` is its path in the job's artifact list.
    Artifact { name: String, path: PathBuf },
}

/// The worker's side of running tasks: where, with what, and how long.
#[derive(Debug, Clone)]
pub struct StageConfig {
    pub workdir: PathBuf,
    pub mirrors: MirrorCache,
    pub skills_dir: PathBuf,
    pub binaries: Binaries,
    pub limits: Limits,
    /// Where GitHub `owner/name` repositories are cloned from.
    pub github: String,
    pub identity: Identity,
    pub gh: PathBuf,
    /// What this worker offers; a skill that needs more stops the task in prepare.
    pub capabilities: Vec<String>,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskOutcome {
    Succeeded {
        summary: String,
    },
    Failed {
        stage: &'static str,
        message: String,
    },
    /// Stopped on request; `stop` is how long the running step took to be gone.
    Cancelled {
        stage: &'static str,
        stop: Duration,
    },
}

/// What a task's auth refs resolved to, on this worker. Never stored, never reported: they
/// reach git and gh through the environment only.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// `auth.repoAuthRef`: fetching the repository.
    pub repo: Option<String>,
    /// `auth.publishAuthRef`: pushing and opening the pull request (the repo's when unset).
    pub publish: Option<String>,
}

/// Runs `task` (job `job_id`) through its three stages.
pub async fn run_task(
    config: &StageConfig,
    job_id: &str,
    task: &NormalizedTask,
    redactor: &Redactor,
    credentials: &Credentials,
    cancel: &CancellationToken,
    reports: mpsc::UnboundedSender<Report>,
) -> TaskOutcome {
    let mut run = Run {
        config,
        task,
        redactor,
        credentials,
        cancel,
        reports,
        ws: None,
    };
    run.go(job_id).await
}

struct Run<'a> {
    config: &'a StageConfig,
    task: &'a NormalizedTask,
    redactor: &'a Redactor,
    credentials: &'a Credentials,
    cancel: &'a CancellationToken,
    reports: mpsc::UnboundedSender<Report>,
    ws: Option<Workspace>,
}

/// A stage's or step's log file under `artifacts/`, written redacted as lines come.
struct Log {
    name: String,
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl Log {
    fn open(ws: &Workspace, name: String) -> Log {
        let path = ws.artifacts.join(&name);
        let file = path
            .parent()
            .and_then(|dir| std::fs::create_dir_all(dir).ok())
            .and_then(|()| std::fs::File::create(&path).ok());
        Log { name, path, file }
    }

    fn line(&mut self, redactor: &Redactor, line: &str) {
        if let Some(file) = &mut self.file {
            let _ = writeln!(file, "{}", redactor.redact(line));
        }
    }
}

impl Run<'_> {
    fn event(&self, kind: &str, level: EventLevel, message: &str, mut payload: Value) {
        self.redactor.redact_json(&mut payload);
        let _ = self.reports.send(Report::Event {
            kind: kind.into(),
            level,
            message: self.redactor.redact(message).into_owned(),
            payload,
        });
    }

    fn artifact(&self, log: Log) {
        drop(log.file);
        let _ = self.reports.send(Report::Artifact {
            name: log.name,
            path: log.path,
        });
    }

    /// Writes a whole artifact file (redacted) and reports it.
    fn write_artifact(&self, ws: &Workspace, name: &str, body: &str) -> Result<(), String> {
        let path = ws.artifacts.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(&path, self.redactor.redact(body).as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = self.reports.send(Report::Artifact {
            name: name.into(),
            path,
        });
        Ok(())
    }

    /// The patch from `from` (a snapshot or commit) to the working copy now, as artifact
    /// `name`. A patch is a convenience for reading; failing to make one stops nothing.
    async fn patch_artifact(&self, ws: &Workspace, name: &str, from: &str) {
        let Ok(now) = publish::snapshot(&ws.repo).await else {
            return;
        };
        if let Ok(patch) = publish::diff(&ws.repo, from, &now).await {
            let _ = self.write_artifact(ws, name, &patch);
        }
    }

    fn stage_started(&self, stage: &str) {
        self.event(
            task::STAGE_STARTED,
            EventLevel::Info,
            stage,
            json!({ "stage": stage }),
        );
    }

    fn stage_finished(&self, stage: &str, outcome: &str, started: Instant) {
        let level = match outcome {
            "failed" => EventLevel::Error,
            "cancelled" => EventLevel::Warn,
            _ => EventLevel::Info,
        };
        self.event(
            task::STAGE_FINISHED,
            level,
            &format!("{stage} {outcome}"),
            json!({ "stage": stage, "outcome": outcome, "durationMs": started.elapsed().as_millis() as u64 }),
        );
    }

    async fn go(&mut self, job_id: &str) -> TaskOutcome {
        let prepared = match self.prepare(job_id).await {
            Ok(prepared) => prepared,
            Err(outcome) => return outcome,
        };
        let steps = self.task.resolved_steps();
        if let Err(outcome) = self.execute(&steps).await {
            return outcome;
        }
        self.publish(&prepared).await
    }

    async fn prepare(&mut self, job_id: &str) -> Result<Prepared, TaskOutcome> {
        const STAGE: &str = task::STAGE_PREPARE;
        let started = Instant::now();
        self.stage_started(STAGE);
        let failed = |run: &Run<'_>, message: &str| {
            run.stage_finished(STAGE, "failed", started);
            TaskOutcome::Failed {
                stage: STAGE,
                message: run.redactor.redact(message).into_owned(),
            }
        };
        let ws = match Workspace::create(&self.config.workdir, job_id) {
            Ok(ws) => ws,
            Err(e) => return Err(failed(self, &e.to_string())),
        };
        let mut log = Log::open(&ws, task::stage_log(STAGE));
        match self.prepare_in(&ws, &mut log, job_id).await {
            Ok(prepared) => {
                self.artifact(log);
                self.stage_finished(STAGE, "succeeded", started);
                self.ws = Some(ws);
                Ok(prepared)
            }
            Err(message) => {
                log.line(self.redactor, &message);
                self.artifact(log);
                Err(failed(self, &message))
            }
        }
    }

    /// The prepare stage's work, logged as it goes; the first failure ends it.
    async fn prepare_in(
        &self,
        ws: &Workspace,
        log: &mut Log,
        job_id: &str,
    ) -> Result<Prepared, String> {
        let payload = &self.task.payload;
        let url = git::clone_url(&payload.repository, &self.config.github);
        log.line(self.redactor, &format!("repository {url}"));
        let mirror = self
            .config
            .mirrors
            .refresh(&url, self.credentials.repo.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        let how = if mirror.cloned { "cloned" } else { "updated" };
        log.line(
            self.redactor,
            &format!("{how} mirror {}", mirror.path.display()),
        );
        let working = payload
            .task
            .git
            .new_branch
            .clone()
            .unwrap_or_else(|| git::generated_branch(job_id, &payload.task.instructions));
        let starting = payload.task.git.starting_branch.as_deref();
        let checkout = git::checkout(&mirror.path, &url, &ws.repo, starting, &working)
            .await
            .map_err(|e| e.to_string())?;
        log.line(
            self.redactor,
            &format!(
                "on {} from {} ({}), default branch {}",
                checkout.working_branch,
                checkout.starting_branch,
                checkout.base_commit,
                checkout.default_branch
            ),
        );
        let skills = ws
            .materialize_skills(&self.config.skills_dir, &self.task.skills())
            .map_err(|e| e.to_string())?;
        for skill in &skills {
            let missing: Vec<&str> = skill
                .required_capabilities
                .iter()
                .filter(|c| !self.config.capabilities.contains(c))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "skill {:?} needs {}, which this worker does not offer",
                    skill.id,
                    missing.join(", ")
                ));
            }
            log.line(self.redactor, &format!("skill {} ready", skill.id));
        }
        ws.link_skills().map_err(|e| e.to_string())?;
        let steps = self.task.resolved_steps();
        let mut context = json!({
            "jobId": job_id,
            "repository": payload.repository,
            "cloneUrl": url,
            "runtime": payload.task.runtime,
            "publish": payload.task.publish,
            "git": {
                "defaultBranch": checkout.default_branch,
                "startingBranch": checkout.starting_branch,
                "workingBranch": checkout.working_branch,
                "baseCommit": checkout.base_commit,
            },
            "skills": skills.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
            "steps": steps.iter().map(|s| json!({
                "stepIndex": s.index, "stepId": s.id, "title": s.title,
                "effectiveSkill": s.effective_skill,
            })).collect::<Vec<_>>(),
            "workspace": {
                "repo": ws.repo, "home": ws.home,
                "skillsActive": ws.skills_active, "artifacts": ws.artifacts,
            },
        });
        self.redactor.redact_json(&mut context);
        self.write_artifact(ws, task::TASK_CONTEXT, &format!("{context:#}\n"))?;
        Ok(Prepared { checkout })
    }

    async fn execute(&mut self, steps: &[ResolvedStep]) -> Result<(), TaskOutcome> {
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
        self.event(
            task::STEPS_PLAN,
            EventLevel::Info,
            &format!("{} step(s)", steps.len()),
            json!({ "count": steps.len(), "stepIds": steps.iter().map(|s| s.id.clone()).collect::<Vec<_>>() }),
        );
        for step in steps {
            if self.cancel.is_cancelled() {
                self.artifact(log);
                self.stage_finished(STAGE, "cancelled", started);
                return Err(TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
                });
            }
            match self.step(&ws, step, steps.len(), &mut log).await {
                StepEnd::Succeeded => {}
                StepEnd::Failed(message) => {
                    self.artifact(log);
                    self.stage_finished(STAGE, "failed", started);
                    return Err(TaskOutcome::Failed {
                        stage: STAGE,
                        message,
                    });
                }
                StepEnd::Cancelled(stop) => {
                    self.artifact(log);
                    self.stage_finished(STAGE, "cancelled", started);
                    return Err(TaskOutcome::Cancelled { stage: STAGE, stop });
                }
            }
        }
        self.artifact(log);
        self.stage_finished(STAGE, "succeeded", started);
        Ok(())
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

    async fn step(
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
        let failed = |run: &Run<'_>, message: String| {
            run.event(
                task::STEP_FAILED,
                EventLevel::Error,
                &message,
                Self::step_payload(step, Some(&message)),
            );
            StepEnd::Failed(message)
        };
        let before = match publish::snapshot(&ws.repo).await {
            Ok(tree) => tree,
            Err(e) => return failed(self, e.to_string()),
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
        let ended = {
            let redactor = self.redactor;
            let reports = self.reports.clone();
            let index = step.index;
            process::run(&invocation, self.config.limits, self.cancel, |_, line| {
                log.line(redactor, line);
                stage_log.line(redactor, line);
                for progress in runtime::parse_line(runtime.mode, line) {
                    match progress {
                        Progress::Message(text) => last_message = Some(text),
                        Progress::Finished { ok, summary } => verdict = Some((ok, summary)),
                        Progress::Action(_) | Progress::Error(_) => {}
                    }
                }
                for text in runtime::readable(runtime.mode, line) {
                    let _ = reports.send(Report::Event {
                        kind: task::STEP_LOG.into(),
                        level: EventLevel::Info,
                        message: redactor.redact(&text).into_owned(),
                        payload: json!({ "stepIndex": index }),
                    });
                }
            })
            .await
        };
        self.artifact(log);
        self.patch_artifact(ws, &task::step_patch(step.index), &before)
            .await;
        let summary = verdict
            .as_ref()
            .and_then(|(_, s)| s.clone())
            .or(last_message)
            .map(|s| s.chars().take(500).collect::<String>());
        match ended {
            Err(e) => failed(self, e.to_string()),
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
            ),
            Ok(Ended::Exited(status)) => {
                let ok = status.success() && verdict.as_ref().is_none_or(|(ok, _)| *ok);
                if ok {
                    self.event(
                        task::STEP_FINISHED,
                        EventLevel::Info,
                        &format!("step {}/{total} finished", step.index + 1),
                        Self::step_payload(step, summary.as_deref()),
                    );
                    StepEnd::Succeeded
                } else {
                    let why = summary.unwrap_or_else(|| format!("the agent exited with {status}"));
                    failed(self, why)
                }
            }
        }
    }

    async fn publish(&mut self, prepared: &Prepared) -> TaskOutcome {
        const STAGE: &str = task::STAGE_PUBLISH;
        let ws = self.ws.clone().expect("prepare made the workspace");
        let started = Instant::now();
        if self.cancel.is_cancelled() {
            return TaskOutcome::Cancelled {
                stage: STAGE,
                stop: Duration::ZERO,
            };
        }
        self.stage_started(STAGE);
        let mut log = Log::open(&ws, task::stage_log(STAGE));
        let checkout = &prepared.checkout;
        match publish::stray_commits(&ws.repo, &checkout.base_commit).await {
            Ok(stray) if !stray.is_empty() => {
                let message = format!("the agent committed on its own: {}", stray.join("; "));
                log.line(self.redactor, &message);
                self.event(
                    task::WARNING,
                    EventLevel::Warn,
                    &message,
                    json!({ "commits": stray }),
                );
            }
            _ => {}
        }
        self.patch_artifact(&ws, task::CHANGES_PATCH, &checkout.base_commit)
            .await;
        let settings = &self.task.payload.task.publish;
        let objective_line = self
            .task
            .payload
            .task
            .instructions
            .lines()
            .next()
            .unwrap_or_default();
        let title = settings
            .pr_title
            .clone()
            .unwrap_or_else(|| objective_line.chars().take(72).collect());
        let message = settings
            .commit_message
            .clone()
            .unwrap_or_else(|| title.clone());
        let body = settings
            .pr_body
            .clone()
            .unwrap_or_else(|| self.task.payload.task.instructions.clone());
        let base = settings
            .pr_base_branch
            .clone()
            .unwrap_or_else(|| checkout.starting_branch.clone());
        let request = PublishRequest {
            mode: settings.mode,
            working_branch: &checkout.working_branch,
            base_branch: &base,
            commit_message: &message,
            pr_title: &title,
            pr_body: &body,
            identity: &self.config.identity,
            gh: &self.config.gh,
            token: self
                .credentials
                .publish
                .as_deref()
                .or(self.credentials.repo.as_deref()),
        };
        let result = publish::publish(&ws.repo, &request).await;
        match result {
            Ok(result) => {
                let json = serde_json::to_value(&result).unwrap_or_default();
                log.line(self.redactor, &format!("publish {}", result.status));
                let _ = self.write_artifact(&ws, task::PUBLISH_RESULT, &format!("{json:#}\n"));
                self.artifact(log);
                let outcome = if result.status == "skipped" {
                    "skipped"
                } else {
                    "succeeded"
                };
                self.stage_finished(STAGE, outcome, started);
                TaskOutcome::Succeeded {
                    summary: match &result.pr_url {
                        Some(url) => format!("pull request {url}"),
                        None => format!("publish {}", result.status),
                    },
                }
            }
            Err(e) => {
                log.line(self.redactor, &e.to_string());
                self.artifact(log);
                self.stage_finished(STAGE, "failed", started);
                TaskOutcome::Failed {
                    stage: STAGE,
                    message: self.redactor.redact(&e.to_string()).into_owned(),
                }
            }
        }
    }
}

struct Prepared {
    checkout: git::Checkout,
}

enum StepEnd {
    Succeeded,
    Failed(String),
    Cancelled(Duration),
}
