//! An operator's hold on a job's course: pause a running or queued job, resume a paused
//! one from a checkpoint, retry one that ended from a step, approve or reject one waiting
//! at the gate before publish. Each is a guarded transition
//! of the state machine; what is read here is only which checkpoint it restores, from the
//! job's timeline.

use contract::events::CheckpointSaved;
use contract::job::events;
use contract::timeline::{StepState, Timeline};
use contract::{Artifact, Job, JobId, JobState, NormalizedTask};

use super::Queue;
use crate::artifacts::ArtifactContent;
use crate::error::{Entity, QueueError, check_reason};
use crate::lease::Fence;
use crate::machine;

impl Queue {
    /// running → pause requested (the worker stops at the next step or iteration
    /// boundary, or at once when `immediate`, and acknowledges); queued → paused at once.
    pub async fn request_pause(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        immediate: bool,
    ) -> Result<Job, QueueError> {
        self.transition(id, |job, now| {
            // Paused and resumed, it would start at once, before the jobs it waits for.
            if job.status == JobState::Queued
                && job.next_attempt_at >= super::dependencies::waiting_start()
            {
                return Err(QueueError::conflict(
                    &job.id,
                    job.status,
                    "it waits for other jobs and holds nothing to pause: cancel it instead",
                ));
            }
            machine::request_pause(job, user_id, immediate, now)
        })
        .await
    }

    /// running with a pause requested → paused, by the worker holding the lease, at the
    /// latest checkpoint its attempt saved (the job's events say which). A cancel
    /// requested meanwhile wins.
    pub async fn ack_pause(&self, id: &JobId, fence: &Fence) -> Result<Job, QueueError> {
        let latest = self.attempt_checkpoint(id).await?;
        let now = self.now();
        let (mut tx, mut job) = self.lock(id).await?;
        let paused_by = if job.status == JobState::Paused {
            tx.last_event(id.uuid(), events::JOB_PAUSED)
                .await?
                .and_then(|event| machine::paused_by(&event.payload))
        } else {
            None
        };
        let outcome = machine::ack_pause(&mut job, fence, now, latest, paused_by.as_ref())?;
        self.write_outcome(tx, &job, outcome, now).await?;
        Ok(job)
    }

    /// paused → queued, from the checkpoint with id `checkpoint` (`step-2`,
    /// `iteration-1`) or, when `None`, the one it paused at. On a running job, withdraws
    /// a pause request its worker has not yet obeyed.
    pub async fn resume(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        checkpoint: Option<&str>,
    ) -> Result<Job, QueueError> {
        let job = self.get_job(id).await?;
        let steps = step_count(&job);
        let chosen = match checkpoint {
            None => None,
            Some(wanted) => {
                let timeline = self.timeline(id, steps).await?;
                let found = timeline
                    .checkpoints
                    .into_iter()
                    .find(|c| c.id == wanted)
                    .ok_or_else(|| {
                        QueueError::invalid(
                            "checkpoint",
                            format!(
                                "the job has no checkpoint {wanted:?}; \
                                 GET /api/queue/jobs/{id}/checkpoints lists them"
                            ),
                        )
                    })?;
                Some(found.saved)
            }
        };
        self.transition(id, |job, now| {
            machine::resume(job, user_id, chosen.clone(), steps, now)
        })
        .await
    }

    /// failed, cancelled or dead_letter → queued: a new attempt that restores the
    /// checkpoint after step `from_step_index − 1` and runs from that step. `None`: from
    /// the first step that did not succeed, or past every step (the completion loop and
    /// publish, from the latest checkpoint) when all did.
    pub async fn retry_from_step(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        from_step_index: Option<usize>,
    ) -> Result<Job, QueueError> {
        let job = self.get_job(id).await?;
        let steps = step_count(&job);
        let timeline = self.timeline(id, steps).await?;
        let rounds = NormalizedTask::from_job(&job)
            .map(|t| t.payload.task.rounds)
            .unwrap_or_default();
        let firsts: Vec<usize> = rounds.iter().map(|r| r.from_step).collect();
        let (from, mut checkpoint) = restore_point(&timeline, steps, from_step_index, &firsts)?;
        // From a follow-up round's first step: where the round started (the branch the job
        // pushed), not an earlier round's checkpoint, which would go back behind it.
        if let Some(round) = rounds.iter().find(|r| r.from_step == from) {
            checkpoint = Some(self.round_start(&job, round.round, from).await?);
        }
        self.transition(id, |job, now| {
            machine::retry_from_step(job, user_id, checkpoint.clone(), from, now)
        })
        .await
    }

    /// running → awaiting_approval, by the worker holding the lease once its steps are
    /// done, at the latest checkpoint its attempt saved.
    pub async fn request_approval(&self, id: &JobId, fence: &Fence) -> Result<Job, QueueError> {
        let latest = self.attempt_checkpoint(id).await?;
        self.transition(id, |job, now| {
            machine::request_approval(job, fence, now, latest.clone())
        })
        .await
    }

    /// awaiting_approval → queued, to publish only.
    pub async fn approve(&self, id: &JobId, user_id: Option<&str>) -> Result<Job, QueueError> {
        self.transition(id, |job, now| machine::approve(job, user_id, now))
            .await
    }

    /// awaiting_approval → failed, with the operator's reason; nothing is published.
    pub async fn reject(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        reason: Option<String>,
    ) -> Result<Job, QueueError> {
        check_reason(reason.as_deref())?;
        self.transition(id, |job, now| {
            machine::reject(job, user_id, reason.clone(), now)
        })
        .await
    }

    /// Adds `steps` (an array of step objects or a markdown checklist) after the job's
    /// steps, checked as at submit. A queued or paused job runs them with the rest; a
    /// running one after its current steps, while one of them is still to end; a job
    /// awaiting approval goes back to the queue to run them.
    pub async fn append_steps(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        steps: &serde_json::Value,
    ) -> Result<Job, QueueError> {
        let job = self.get_job(id).await?;
        // The state is the first thing that can be wrong: said before the steps are judged.
        machine::check_appendable(&job)?;
        let task = contract::append_steps(&job.payload, steps, &self.inner.config.defaults)
            .map_err(QueueError::Invalid)?;
        let counts = (step_count(&job), task.resolved_steps().len());
        let payload = serde_json::to_value(&task.payload)
            .map_err(|e| QueueError::invalid("steps", e.to_string()))?;
        let now = self.now();
        let (mut tx, mut locked) = self.lock(id).await?;
        if locked.status == JobState::Running {
            // Read under the lock: the worker's step events wait for it, so the steps'
            // ends seen here are all there are until this append is stored.
            let timeline = self.timeline(id, counts.0).await?;
            machine::check_steps_pending(&locked, &timeline)?;
        }
        let outcome =
            machine::append_steps(&mut locked, user_id, &job.payload, payload, counts, now)?;
        tx.save_payload(&locked).await?;
        self.write_outcome(tx, &locked, outcome, now).await?;
        Ok(locked)
    }

    /// Sets the job's budget from `raw` (`{maxCostUsd?, maxTokens?, maxMinutes?}`, checked
    /// for the job's runtime), replacing the one it had. A job paused for its budget can be
    /// resumed once the new one is not spent.
    pub async fn set_budget(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        raw: &serde_json::Value,
    ) -> Result<Job, QueueError> {
        let job = self.get_job(id).await?;
        let runtime = NormalizedTask::from_job(&job)
            .map(|task| task.payload.task.runtime.mode)
            .map_err(|_| {
                QueueError::conflict(&job.id, job.status, "the job's payload is not a task")
            })?;
        let budget = contract::normalize::budget(raw, runtime).map_err(QueueError::Invalid)?;
        let now = self.now();
        let (mut tx, mut locked) = self.lock(id).await?;
        let outcome = machine::set_budget(&mut locked, user_id, budget, now)?;
        if outcome != machine::Outcome::Unchanged {
            tx.save_payload(&locked).await?;
        }
        self.write_outcome(tx, &locked, outcome, now).await?;
        Ok(locked)
    }

    /// The patch of the checkpoint the worker's attempt resumes from (`resumeFrom`), for
    /// its prepare stage to apply: only while it holds the lease.
    pub async fn resume_patch(
        &self,
        id: &JobId,
        fence: &Fence,
    ) -> Result<(Artifact, ArtifactContent), QueueError> {
        let job = self.get_job(id).await?;
        machine::check_fence(&job, fence)?;
        let saved = job.resume_from.ok_or_else(|| QueueError::NotFound {
            entity: Entity::Artifact,
            id: format!("{id}/resumeFrom (this attempt starts from scratch)"),
        })?;
        self.open_artifact(id, &saved.artifact).await
    }

    /// The agent session the job's worker kept (`session/agent.json`), for the prepare
    /// stage of a later attempt or round to continue it: only while it holds the lease.
    pub async fn resume_session(
        &self,
        id: &JobId,
        fence: &Fence,
    ) -> Result<(Artifact, ArtifactContent), QueueError> {
        let job = self.get_job(id).await?;
        machine::check_fence(&job, fence)?;
        self.open_artifact(id, contract::session::AGENT_SESSION)
            .await
    }

    /// The latest checkpoint of the job's current attempt, or the one it started from.
    pub(crate) async fn attempt_checkpoint(
        &self,
        id: &JobId,
    ) -> Result<Option<CheckpointSaved>, QueueError> {
        let timeline = self.timeline(id, 0).await?;
        Ok(timeline.checkpoints.last().map(|c| c.saved.clone()))
    }
}

/// How many steps the job's task has; 0 for a payload that does not read as a task
/// (nothing to skip, so every retry starts from the start).
pub(super) fn step_count(job: &Job) -> usize {
    NormalizedTask::from_job(job)
        .map(|task| task.resolved_steps().len())
        .unwrap_or(0)
}

/// Where a retry starts: the step, and the checkpoint that restores the work before it.
/// A round's first step (of `round_firsts`) is answered with no checkpoint: the caller
/// starts it where the round started.
fn restore_point(
    timeline: &Timeline,
    steps: usize,
    asked: Option<usize>,
    round_firsts: &[usize],
) -> Result<(usize, Option<CheckpointSaved>), QueueError> {
    let first_unfinished = timeline
        .steps
        .iter()
        .position(|s| s.state != StepState::Succeeded)
        .unwrap_or(steps);
    let from = match asked {
        Some(from) if from > steps => {
            return Err(QueueError::invalid(
                "fromStepIndex",
                format!("must be at most {steps}: the task has {steps} step(s), indexed from 0"),
            ));
        }
        Some(from) => from,
        None => first_unfinished,
    };
    if from == 0 || round_firsts.contains(&from) {
        return Ok((from, None));
    }
    let after = from - 1;
    let found = if from == steps && asked.is_none() {
        // Every step succeeded: the loop or publish failed. Resume from the latest
        // checkpoint, after the last step or a later iteration.
        timeline.checkpoints.last()
    } else {
        timeline
            .checkpoints
            .iter()
            .rev()
            .find(|c| c.saved.after_step == Some(after))
    };
    match found {
        Some(checkpoint) => Ok((from, Some(checkpoint.saved.clone()))),
        None => Err(QueueError::invalid(
            "fromStepIndex",
            format!(
                "no checkpoint after step {} was saved, so step {} cannot start from it; \
                 retry from an earlier step (0 starts over)",
                after + 1,
                from + 1
            ),
        )),
    }
}
