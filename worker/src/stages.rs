//! One task run, stage by stage: `moonmind.task.prepare` (workspace, checkout, skills,
//! task_context.json), `moonmind.task.execute` (every step, in order, one CLI invocation
//! each, fail fast) and `moonmind.task.publish` (once, only after every step succeeded).
//!
//! What the run has to say goes out as [`Report`]s on a channel: events and finished
//! artifact files, already redacted. Whoever holds the other end sends them to the server
//! (the claim loop) or keeps them (tests); the stages never talk HTTP themselves.
//!
//! Each stage has its own file: `stages/prepare.rs`, `stages/execute.rs` (the steps),
//! `stages/publish.rs`. What is here is what they share: the run, its logs and reports.

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use contract::events::{CheckpointSaved, StageFinished, StageStarted, TaskEvent};
use contract::job::task;
use contract::{EventLevel, JobId, NormalizedTask, StageState, limits};
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::git::MirrorCache;
use crate::logins::{self, Logins};
use crate::process::{Budget, Limits};
use crate::publish::Identity;
use crate::redact::Redactor;
use crate::runtime::{Binaries, Endpoints};
use crate::sandbox::Sandbox;
use crate::workspace::Workspace;

mod container;
mod execute;
mod invoke;
mod iterate;
mod prepare;
mod publish;
mod session;
mod spend;

pub use spend::Pause;

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
    /// Everything reported before it has reached the other end: it is answered then
    /// (dropping it answers too). Only the claim loop's hold sends it.
    Flush(Flushed),
}

/// The answer a [`Report::Flush`] waits for.
#[derive(Clone)]
pub struct Flushed(std::sync::Arc<std::sync::Mutex<Option<oneshot::Sender<()>>>>);

impl Flushed {
    pub fn new() -> (Flushed, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (
            Flushed(std::sync::Arc::new(std::sync::Mutex::new(Some(tx)))),
            rx,
        )
    }

    /// Says that everything before it went out.
    pub fn answer(&self) {
        if let Some(tx) = self.0.lock().ok().and_then(|mut tx| tx.take()) {
            let _ = tx.send(());
        }
    }
}

impl std::fmt::Debug for Flushed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Flushed")
    }
}

impl PartialEq for Flushed {
    fn eq(&self, other: &Flushed) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
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
    /// The box each agent step and check runs in.
    pub sandbox: Sandbox,
    /// The container engine container tasks run with; `None` when none answered.
    pub engine: Option<crate::container::Engine>,
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
    /// Stopped at a step or iteration boundary because a pause was requested; the work
    /// is kept in the latest checkpoint.
    Paused {
        stage: &'static str,
    },
    /// The steps are done and the task wants an operator's approval before publishing:
    /// the work is kept in the latest checkpoint, its diff in `patches/changes.patch`.
    AwaitingApproval,
}

/// A checkpoint to restore before the steps run: where it was taken, and its patch (as
/// the queue stored it) against its base commit.
#[derive(Debug, Clone)]
pub struct Restore {
    pub checkpoint: CheckpointSaved,
    pub patch: Vec<u8>,
    /// The agent session the job's worker kept, for the steps to continue.
    pub session: Option<contract::session::KeptSession>,
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
    fn confirm(&self) -> BoxFuture<'_, Result<(), String>>;

    /// The job's task as the queue holds it now (steps may have been appended), read with
    /// a renewal of the lease; `None` when it cannot be read (the heartbeat deals with an
    /// outage). `settled`: only once everything reported so far has reached the queue,
    /// and the renewal is retried while the lease lasts. The queue takes no more steps
    /// once the last step's end has reached it, so this read after that end is the last
    /// one that matters.
    fn latest_task(&self, settled: bool) -> BoxFuture<'_, Option<NormalizedTask>> {
        let _ = settled;
        Box::pin(async { None })
    }
}

/// A job no one else can take: always held, and its task never changes.
pub struct Unshared;

impl Hold for Unshared {
    fn confirm(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// What a run acts with besides its task: the redactor for everything it writes, the
/// credentials its git and gh use, its hold on the job, the checkpoint it resumes from
/// and the operator's pause.
pub struct Warrant<'a> {
    pub redactor: &'a Redactor,
    pub credentials: &'a Credentials,
    pub hold: &'a dyn Hold,
    pub restore: Option<&'a Restore>,
    pub pause: &'a Pause,
    /// An operator approved the work (restored from `restore`): publish it, run nothing.
    pub approved: bool,
    /// What the job had used when this run began (its `usage`), which its budget counts.
    pub spent: contract::StepUsage,
}

/// Runs `task` (job `job_id`) through its three stages.
pub async fn run_task(
    config: &StageConfig,
    job_id: &JobId,
    task: &NormalizedTask,
    warrant: Warrant<'_>,
    cancel: &CancellationToken,
    reports: mpsc::UnboundedSender<Report>,
) -> TaskOutcome {
    let mut run = Run {
        config,
        redactor: warrant.redactor,
        credentials: warrant.credentials,
        hold: warrant.hold,
        restore: warrant.restore,
        pause: warrant.pause,
        approved: warrant.approved,
        spent: std::sync::Mutex::new(warrant.spent),
        budget: task.payload.task.budget,
        task: Cow::Borrowed(task),
        cancel,
        reports,
        ws: None,
        base_commit: None,
        login_copies: Vec::new(),
        session: session::Known::Nothing,
    };
    let outcome = run.go(job_id).await;
    run.round_finished(&outcome);
    // Never left behind, even in a workspace kept to look into.
    if let Some(ws) = &run.ws {
        logins::remove(&ws.home, &run.login_copies);
    }
    outcome
}

struct Run<'a> {
    hold: &'a dyn Hold,
    restore: Option<&'a Restore>,
    pause: &'a Pause,
    approved: bool,
    /// What the job has used, this run's reports included (`spend.rs`).
    spent: std::sync::Mutex<contract::StepUsage>,
    /// The task's budget, as last read from the queue (an operator may raise it).
    budget: Option<contract::JobBudget>,
    config: &'a StageConfig,
    /// The task as claimed, or with the steps appended since (`execute.rs`).
    task: Cow<'a, NormalizedTask>,
    redactor: &'a Redactor,
    credentials: &'a Credentials,
    cancel: &'a CancellationToken,
    reports: mpsc::UnboundedSender<Report>,
    ws: Option<Workspace>,
    /// What the job's work is measured against, once prepare has checked it out.
    base_commit: Option<String>,
    login_copies: Vec<std::path::PathBuf>,
    /// The job's agent session, as the next agent run is to go about it (`session.rs`).
    session: session::Known,
}

/// Sends one line of step `index`'s live tail (`task.step.log`), redacted and cut.
fn send_tail(
    reports: &mpsc::UnboundedSender<Report>,
    redactor: &Redactor,
    index: usize,
    text: &str,
) {
    use contract::events::{StepLog, TaskEvent};
    let _ = reports.send(Report::Event {
        kind: StepLog::KIND.into(),
        level: EventLevel::Info,
        message: redactor.redact_and_cut(text, limits::EVENT_MESSAGE_BYTES),
        payload: Value::Object(StepLog { step_index: index }.payload()),
    });
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

    /// Reports `event` with `message`, both redacted.
    fn event<E: TaskEvent>(&self, level: EventLevel, message: &str, event: &E) {
        let mut payload = Value::Object(event.payload());
        self.redactor.redact_json(&mut payload);
        self.count_spent(E::KIND, &payload);
        let _ = self.reports.send(Report::Event {
            kind: E::KIND.into(),
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
        let Ok(now) = crate::publish::snapshot(&ws.repo, budget).await else {
            return;
        };
        if let Ok(patch) = crate::publish::diff(&ws.repo, from, &now, budget).await {
            let _ = self.write_artifact(ws, name, &patch);
        }
    }

    /// Saves a checkpoint: all the work so far, as one patch against the base commit, and
    /// its event. A checkpoint is for resuming and reading; failing to save one stops
    /// nothing (the event is not sent without its patch).
    async fn checkpoint(&self, ws: &Workspace, saved: CheckpointSaved) {
        let budget = self.publish_budget(true);
        let Ok(now) = crate::publish::snapshot(&ws.repo, &budget).await else {
            return;
        };
        let Ok(patch) = crate::publish::diff(&ws.repo, &saved.base_commit, &now, &budget).await
        else {
            return;
        };
        if self.write_artifact(ws, &saved.artifact, &patch).is_ok() {
            let message = format!("checkpoint saved {}", saved.label());
            self.event(EventLevel::Info, &message, &saved);
        }
    }

    /// The checkpoint after the step at `index`, when the base commit is known.
    fn step_checkpoint(&self, index: usize) -> Option<CheckpointSaved> {
        Some(CheckpointSaved {
            after_step: Some(index),
            after_iteration: None,
            base_commit: self.base_commit.clone()?,
            artifact: contract::job::task::step_checkpoint(index),
            steps_done: None,
            round: None,
            branch: None,
        })
    }

    /// The checkpoint after iteration `n`.
    fn iteration_checkpoint(&self, n: u32) -> Option<CheckpointSaved> {
        Some(CheckpointSaved {
            after_step: None,
            after_iteration: Some(n),
            base_commit: self.base_commit.clone()?,
            artifact: contract::job::task::iteration_checkpoint(n),
            steps_done: Some(self.task.resolved_steps().len()),
            round: None,
            branch: None,
        })
    }

    fn stage_started(&self, stage: &str) {
        let started = StageStarted {
            stage: stage.into(),
        };
        self.event(EventLevel::Info, stage, &started);
    }

    fn stage_finished(&self, stage: &str, outcome: StageState, started: Instant) {
        let level = match outcome {
            StageState::Failed => EventLevel::Error,
            StageState::Cancelled => EventLevel::Warn,
            _ => EventLevel::Info,
        };
        let finished = StageFinished {
            stage: stage.into(),
            outcome: Some(outcome),
            duration_ms: Some(started.elapsed().as_millis() as u64),
        };
        self.event(level, &format!("{stage} {outcome}"), &finished);
    }

    async fn go(&mut self, job_id: &JobId) -> TaskOutcome {
        let prepared = match self.prepare(job_id).await {
            Ok(prepared) => prepared,
            Err(outcome) => return outcome,
        };
        self.base_commit = Some(prepared.checkout.base_commit.clone());
        let steps = self.task.resolved_steps().len();
        // A resumed run starts after its checkpoint: the next step, or the loop.
        let from = self.restore.map_or(0, |r| r.checkpoint.resume_step(steps));
        if self.approved {
            // The approved work was restored by prepare; only publishing is left.
            return self.publish(&prepared).await;
        }
        if let Err(outcome) = self.execute(from).await {
            return outcome;
        }
        if self.task.payload.task.publish.approval_required {
            // Stop before anything leaves the machine: the diff is what the operator
            // reviews, the latest checkpoint what an approved attempt publishes.
            if let Some(ws) = self.ws.clone() {
                let budget = self.publish_budget(false);
                let base = prepared.checkout.base_commit.clone();
                self.patch_artifact(&ws, task::CHANGES_PATCH, &base, &budget)
                    .await;
            }
            return TaskOutcome::AwaitingApproval;
        }
        self.publish(&prepared).await
    }
}
