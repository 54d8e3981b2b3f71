//! One task run, stage by stage: `moonmind.task.prepare` (workspace, checkout, skills,
//! task_context.json), `moonmind.task.execute` (every step, in order, one CLI invocation
//! each, fail fast) and `moonmind.task.publish` (once, only after every step succeeded).
//!
//! What the run has to say goes out as [`Report`]s on a channel: events and finished
//! artifact files, already redacted. Whoever holds the other end sends them to the server
//! (the claim loop) or keeps them (tests); the stages never talk HTTP themselves.
//!
//! Past 500 lines because prepare and publish still live here beside the runner; the step
//! itself already has its own file (`stages/step.rs`), and those two are next.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use contract::job::task;
use contract::{EventLevel, NormalizedTask, ResolvedStep, limits};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::git::{self, MirrorCache};
use crate::logins::{self, Logins};
use crate::process::{Budget, Limits};
use crate::publish::{self, Identity, PublishRequest};
use crate::redact::Redactor;
use crate::runtime::{Binaries, Endpoints};
use crate::workspace::Workspace;

mod step;
use step::StepEnd;

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
    /// Each runtime's model endpoint and API key, passed on to its CLI.
    pub endpoints: Endpoints,
    /// The worker user's logins, copied into each job's HOME when sharing them is on.
    pub logins: Option<Logins>,
    /// A step's timeout, and the grace between SIGTERM and SIGKILL for every stop.
    pub limits: Limits,
    /// The longest the prepare stage's git may take in all (the mirror's clone or fetch,
    /// the checkout).
    pub prepare_timeout: Duration,
    /// The longest the publish stage's git and gh may take in all; it also bounds the
    /// snapshots and patches taken around each step.
    pub publish_timeout: Duration,
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

/// The run's hold on its job, which the publish stage confirms before anything leaves the
/// machine: a worker that may have lost its lease must not push, since another worker may
/// already run the job again. The claim loop confirms with a heartbeat; stages run on
/// their own (tests, benchmarks) share the job with nobody ([`Unshared`]).
pub trait Hold: Send + Sync {
    /// `Err` says why the job may no longer be acted on.
    fn confirm(&self) -> futures_util::future::BoxFuture<'_, Result<(), String>>;
}

/// A job no one else can take: always held.
pub struct Unshared;

impl Hold for Unshared {
    fn confirm(&self) -> futures_util::future::BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// What a run acts with besides its task: the redactor for everything it writes, the
/// credentials its git and gh use, and its hold on the job.
pub struct Warrant<'a> {
    pub redactor: &'a Redactor,
    pub credentials: &'a Credentials,
    pub hold: &'a dyn Hold,
}

/// Runs `task` (job `job_id`) through its three stages.
pub async fn run_task(
    config: &StageConfig,
    job_id: &str,
    task: &NormalizedTask,
    warrant: Warrant<'_>,
    cancel: &CancellationToken,
    reports: mpsc::UnboundedSender<Report>,
) -> TaskOutcome {
    let mut run = Run {
        config,
        task,
        redactor: warrant.redactor,
        credentials: warrant.credentials,
        hold: warrant.hold,
        cancel,
        reports,
        ws: None,
        login_copies: Vec::new(),
    };
    let outcome = run.go(job_id).await;
    // Never left behind, even in a workspace kept to look into.
    logins::remove(&run.login_copies);
    outcome
}

struct Run<'a> {
    hold: &'a dyn Hold,
    config: &'a StageConfig,
    task: &'a NormalizedTask,
    redactor: &'a Redactor,
    credentials: &'a Credentials,
    cancel: &'a CancellationToken,
    reports: mpsc::UnboundedSender<Report>,
    ws: Option<Workspace>,
    login_copies: Vec<std::path::PathBuf>,
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

/// Why the prepare stage's work stopped short.
enum Stop {
    Failed(String),
    Cancelled,
}

impl From<String> for Stop {
    fn from(message: String) -> Stop {
        Stop::Failed(message)
    }
}

impl From<git::GitError> for Stop {
    fn from(error: git::GitError) -> Stop {
        if error.is_cancelled() {
            Stop::Cancelled
        } else {
            Stop::Failed(error.to_string())
        }
    }
}

impl Run<'_> {
    /// The prepare stage's git: its own timeout, stopped by the job's cancel.
    fn prepare_budget(&self) -> Budget {
        Budget::new(
            "--prepare-timeout-seconds",
            self.config.prepare_timeout,
            self.config.limits.grace,
            self.cancel.clone(),
        )
    }

    /// The publish stage's git and gh, and the snapshots around a step; `cancellable`
    /// false for the patch of what a cancelled step did, which is still wanted.
    fn publish_budget(&self, cancellable: bool) -> Budget {
        Budget::new(
            "--publish-timeout-seconds",
            self.config.publish_timeout,
            self.config.limits.grace,
            if cancellable {
                self.cancel.clone()
            } else {
                CancellationToken::new()
            },
        )
    }

    fn event(&self, kind: &str, level: EventLevel, message: &str, mut payload: Value) {
        self.redactor.redact_json(&mut payload);
        let _ = self.reports.send(Report::Event {
            kind: kind.into(),
            level,
            message: self
                .redactor
                .redact_and_cut(message, limits::EVENT_MESSAGE_BYTES),
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
    async fn patch_artifact(&self, ws: &Workspace, name: &str, from: &str, budget: &Budget) {
        let Ok(now) = publish::snapshot(&ws.repo, budget).await else {
            return;
        };
        if let Ok(patch) = publish::diff(&ws.repo, from, &now, budget).await {
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
        if let Some(logins) = &self.config.logins {
            let mode = self.task.payload.task.runtime.mode;
            match logins.install(mode, &ws.home) {
                Ok(copies) => {
                    let names: Vec<String> = copies
                        .iter()
                        .filter_map(|c| c.strip_prefix(&ws.home).ok())
                        .map(|c| format!("~/{}", c.display()))
                        .collect();
                    let said = if names.is_empty() {
                        format!("no {mode} login found in {}", logins.home.display())
                    } else {
                        format!("{mode} login shared: {}", names.join(", "))
                    };
                    log.line(self.redactor, &said);
                    self.login_copies = copies;
                }
                Err(e) => log.line(self.redactor, &format!("{mode} login not shared: {e}")),
            }
        }
        match self.prepare_in(&ws, &mut log, job_id).await {
            Ok(prepared) => {
                self.artifact(log);
                self.stage_finished(STAGE, "succeeded", started);
                self.ws = Some(ws);
                Ok(prepared)
            }
            Err(Stop::Failed(message)) => {
                log.line(self.redactor, &message);
                self.artifact(log);
                Err(failed(self, &message))
            }
            Err(Stop::Cancelled) => {
                log.line(self.redactor, "stopped: the job was cancelled");
                self.artifact(log);
                self.stage_finished(STAGE, "cancelled", started);
                Err(TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
                })
            }
        }
    }

    /// The prepare stage's work, logged as it goes; the first failure ends it.
    async fn prepare_in(
        &self,
        ws: &Workspace,
        log: &mut Log,
        job_id: &str,
    ) -> Result<Prepared, Stop> {
        let budget = self.prepare_budget();
        let payload = &self.task.payload;
        let url = git::clone_url(&payload.repository, &self.config.github);
        log.line(self.redactor, &format!("repository {url}"));
        let mirror = self
            .config
            .mirrors
            .refresh(&url, self.credentials.repo.as_deref(), &budget)
            .await?;
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
        let checkout =
            git::checkout(&mirror.path, &url, &ws.repo, starting, &working, &budget).await?;
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
                return Err(Stop::Failed(format!(
                    "skill {:?} needs {}, which this worker does not offer",
                    skill.id,
                    missing.join(", ")
                )));
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
        let budget = self.publish_budget(true);
        match publish::stray_commits(&ws.repo, &checkout.base_commit, &budget).await {
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
        self.patch_artifact(&ws, task::CHANGES_PATCH, &checkout.base_commit, &budget)
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
        // What leaves for the git host is redacted like everything else the worker sends,
        // and cut only after that.
        let redact = |text: &str| self.redactor.redact(text).into_owned();
        let title = match &settings.pr_title {
            Some(title) => redact(title),
            None => redact(objective_line).chars().take(72).collect(),
        };
        let message = settings
            .commit_message
            .as_deref()
            .map_or_else(|| title.clone(), redact);
        let body = redact(
            settings
                .pr_body
                .as_deref()
                .unwrap_or(&self.task.payload.task.instructions),
        );
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
            own_branch: self.task.payload.task.git.new_branch.is_none(),
        };
        if request.mode != contract::PublishMode::None
            && let Err(why) = self.hold.confirm().await
        {
            let message = format!("nothing was published: {why}");
            log.line(self.redactor, &message);
            self.artifact(log);
            self.stage_finished(STAGE, "failed", started);
            return TaskOutcome::Failed {
                stage: STAGE,
                message,
            };
        }
        let result = publish::publish(&ws.repo, &request, &budget).await;
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
            Err(e) if e.is_cancelled() => {
                log.line(self.redactor, &e.to_string());
                self.artifact(log);
                self.stage_finished(STAGE, "cancelled", started);
                TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
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
