//! `moonmind.task.prepare`: the workspace, the checkout from the repository's mirror, the
//! skills, and `task_context.json`.

use std::time::{Duration, Instant};

use contract::events::{StepStarted, TaskEvent};
use contract::job::task;
use contract::{JobId, StageState};
use serde_json::json;

use super::{Log, Run, TaskOutcome};
use crate::git;
use crate::workspace::{ActiveSkill, Workspace};

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

pub(super) struct Prepared {
    pub(super) checkout: git::Checkout,
}

impl Run<'_> {
    pub(super) async fn prepare(&mut self, job_id: &JobId) -> Result<Prepared, TaskOutcome> {
        const STAGE: &str = task::STAGE_PREPARE;
        let started = Instant::now();
        self.stage_started(STAGE);
        let failed = |run: &Run<'_>, message: &str| {
            run.stage_finished(STAGE, StageState::Failed, started);
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
                self.restore_session(&ws, &mut log);
                self.artifact(log);
                self.stage_finished(STAGE, StageState::Succeeded, started);
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
                self.stage_finished(STAGE, StageState::Cancelled, started);
                Err(TaskOutcome::Cancelled {
                    stage: STAGE,
                    stop: Duration::ZERO,
                })
            }
        }
    }

    /// Puts the work of an earlier attempt back: the working branch moved to the
    /// checkpoint's base commit (the starting branch may have moved on since), and its
    /// patch applied on top, uncommitted, as the steps left it. The job's work is then
    /// measured against that base commit, as before.
    async fn restore_checkpoint(
        &self,
        ws: &Workspace,
        checkout: &mut git::Checkout,
        restore: &super::Restore,
        log: &mut Log,
        budget: &crate::process::Budget,
    ) -> Result<(), Stop> {
        let saved = &restore.checkpoint;
        if self
            .round_from_branch(ws, checkout, saved, log, budget)
            .await?
        {
            return Ok(());
        }
        let base = saved.base_commit.as_str();
        if base.is_empty() && saved.round.is_some() {
            log.line(
                self.redactor,
                &format!(
                    "round {}: nothing was kept from the rounds before; it starts afresh",
                    saved.round.unwrap_or_default()
                ),
            );
            return Ok(());
        }
        if !base.bytes().all(|b| b.is_ascii_hexdigit()) || base.is_empty() {
            return Err(Stop::Failed(format!(
                "the checkpoint {} names no commit ({base:?})",
                saved.label()
            )));
        }
        let working = checkout.working_branch.clone();
        git::git(
            &ws.repo,
            &["checkout", "--quiet", "-B", &working, base],
            budget,
        )
        .await
        .map_err(|e| {
            Stop::Failed(format!(
                "cannot restore the checkpoint {}: its base commit {base} is not in the \
                 repository any more ({e}); retry the job from the first step",
                saved.label()
            ))
        })?;
        if !restore.patch.is_empty() {
            let file = ws.root.join("checkpoint.patch");
            std::fs::write(&file, &restore.patch).map_err(|e| e.to_string())?;
            let path = file.to_string_lossy().into_owned();
            let applied = git::git(
                &ws.repo,
                &["apply", "--binary", "--whitespace=nowarn", &path],
                budget,
            )
            .await;
            let _ = std::fs::remove_file(&file);
            applied.map_err(|e| {
                Stop::Failed(format!(
                    "the patch of the checkpoint {} does not apply to {base} ({e}); \
                     retry the job from an earlier step",
                    saved.label()
                ))
            })?;
        }
        checkout.base_commit = base.to_string();
        log.line(
            self.redactor,
            &format!(
                "restored the checkpoint {} ({} bytes of patch) onto {base}",
                saved.label(),
                restore.patch.len()
            ),
        );
        Ok(())
    }

    /// A follow-up round's start from the branch the job pushed: the working branch at its
    /// tip, which is what the round's work is measured against and pushed on top of (so
    /// the branch, and a pull request of it, only move forward). `false` when the start is
    /// not a round's, or the branch is gone (merged and deleted, say): then the patch of
    /// the job's latest checkpoint is restored instead.
    async fn round_from_branch(
        &self,
        ws: &Workspace,
        checkout: &mut git::Checkout,
        saved: &contract::events::CheckpointSaved,
        log: &mut Log,
        budget: &crate::process::Budget,
    ) -> Result<bool, Stop> {
        let Some(round) = saved.round else {
            return Ok(false);
        };
        // The job's own branch when the queue knows of none pushed (its publish result was
        // not kept): a round builds on whatever the job's branch holds, never beside it.
        let branch = saved
            .branch
            .as_deref()
            .unwrap_or(&checkout.working_branch)
            .to_string();
        let pushed = format!("refs/remotes/origin/{branch}");
        let tip = match git::git(
            &ws.repo,
            &["rev-parse", "--verify", "--quiet", &pushed],
            budget,
        )
        .await
        {
            Ok(tip) => tip,
            Err(e) if e.is_cancelled() => return Err(Stop::Cancelled),
            Err(_) => {
                log.line(
                    self.redactor,
                    &format!("round {round}: no branch {branch} in the repository to build on; the round starts from the job's latest checkpoint"),
                );
                return Ok(false);
            }
        };
        let working = checkout.working_branch.clone();
        git::git(
            &ws.repo,
            &["checkout", "--quiet", "-B", &working, &tip],
            budget,
        )
        .await?;
        checkout.base_commit = tip.clone();
        log.line(
            self.redactor,
            &format!("round {round}: on {working} from the tip of {branch} ({tip}), as the job last pushed it"),
        );
        Ok(true)
    }

    /// The prepare stage's work, logged as it goes; the first failure ends it.
    async fn prepare_in(
        &self,
        ws: &Workspace,
        log: &mut Log,
        job_id: &JobId,
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
        let mut checkout =
            git::checkout(&mirror.path, &url, &ws.repo, starting, &working, &budget).await?;
        if let Some(restore) = self.restore {
            self.restore_checkpoint(ws, &mut checkout, restore, log, &budget)
                .await?;
        }
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
        let skills = self.ready_skills(ws, &self.task.skills(), log)?;
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
            "steps": steps.iter().map(|s| {
                let mut step = StepStarted { step: s.into() }.payload();
                step.insert("title".into(), json!(s.title));
                step
            }).collect::<Vec<_>>(),
            "workspace": {
                "repo": ws.repo, "home": ws.home,
                "skillsActive": ws.skills_active, "artifacts": ws.artifacts,
            },
        });
        self.redactor.redact_json(&mut context);
        self.write_artifact(ws, task::TASK_CONTEXT, &format!("{context:#}\n"))?;
        Ok(Prepared { checkout })
    }

    /// Copies the skills `ids` into the workspace and links them where the agents look,
    /// once each is known to need nothing this worker lacks.
    pub(super) fn ready_skills(
        &self,
        ws: &Workspace,
        ids: &[String],
        log: &mut Log,
    ) -> Result<Vec<ActiveSkill>, String> {
        let skills = ws
            .materialize_skills(&self.config.skills_dir, ids)
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
        Ok(skills)
    }
}
