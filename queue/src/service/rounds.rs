//! A follow-up on an ended job: the steps it adds are checked as at submit, recorded as the
//! job's next round, and the job is queued again to run them from what it last produced.

use contract::events::CheckpointSaved;
use contract::job::events;
use contract::{Job, JobId, Round};
use serde_json::{Value, json};

use super::Queue;
use super::pauses::step_count;
use crate::error::QueueError;
use crate::machine;

impl Queue {
    /// Follows up on a job that succeeded or failed with `body`: `{"steps": [...]}` (the
    /// task's step shape, or a markdown checklist) or `{"instructions": "..."}` for one
    /// step. The job becomes its next round, queued to run only the new steps: from the
    /// tip of the branch it pushed when it pushed one (so the same branch and pull request
    /// are updated), else from its latest checkpoint.
    pub async fn follow_up(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        body: &Value,
    ) -> Result<Job, QueueError> {
        let made = self.follow_up_for(id, user_id, body, None).await?;
        made.ok_or_else(|| QueueError::invalid("steps", "nothing to follow up with"))
    }

    /// A follow-up made of the pull request's feedback, `causes` naming what in it (a
    /// check run, a review) the round takes: each cause is taken once, whichever replica
    /// saw it. `None` when each was taken already (by this job's rounds).
    pub async fn feedback_round(
        &self,
        id: &JobId,
        causes: Vec<String>,
        instructions: &str,
    ) -> Result<Option<Job>, QueueError> {
        self.caused_round(id, None, causes, instructions).await
    }

    /// A follow-up a person asked for by a comment that mentions stepwise on the job's own
    /// pull request: `comment` (GitHub's id of it) is taken once, however often the
    /// delivery comes.
    pub async fn mention_round(
        &self,
        id: &JobId,
        user_id: &str,
        comment: u64,
        instructions: &str,
    ) -> Result<Option<Job>, QueueError> {
        let cause = format!("{}{comment}", contract::model::MENTION_CAUSE);
        self.caused_round(id, Some(user_id), vec![cause], instructions)
            .await
    }

    async fn caused_round(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        causes: Vec<String>,
        instructions: &str,
    ) -> Result<Option<Job>, QueueError> {
        let body = json!({ "instructions": instructions });
        match self
            .follow_up_for(id, user_id, &body, Some(causes.clone()))
            .await
        {
            // Another replica made it first: the job moved on, with the round.
            Err(QueueError::StateConflict { .. })
                if untaken(&self.get_job(id).await?, causes).is_empty() =>
            {
                Ok(None)
            }
            made => made,
        }
    }

    /// The follow-up of `body`; a round of feedback names its `causes`, and is not made
    /// (`None`) when every one was taken: judged on the very task the round is made from,
    /// which the write under the row lock then checks has not changed.
    async fn follow_up_for(
        &self,
        id: &JobId,
        user_id: Option<&str>,
        body: &Value,
        causes: Option<Vec<String>>,
    ) -> Result<Option<Job>, QueueError> {
        let job = self.get_job(id).await?;
        let causes = match causes {
            None => Vec::new(),
            Some(causes) => match untaken(&job, causes) {
                causes if causes.is_empty() => return Ok(None),
                causes => causes,
            },
        };
        // The state is the first thing that can be wrong: said before the steps are judged.
        machine::check_follow_up(&job)?;
        let steps = round_steps(body)?;
        let mut task = contract::append_steps(&job.payload, &steps, &self.inner.config.defaults)
            .map_err(QueueError::Invalid)?;
        let before = step_count(&job);
        let round = job.round + 1;
        task.payload.task.rounds.push(Round {
            round,
            from_step: before,
            causes,
        });
        let payload = serde_json::to_value(&task.payload)
            .map_err(|e| QueueError::invalid("steps", e.to_string()))?;
        let start = self.round_start(&job, round, before).await?;
        let now = self.now();
        let (mut tx, mut locked) = self.lock(id).await?;
        if tx
            .last_event(id.uuid(), events::JOB_HISTORY_DELETED)
            .await?
            .is_some()
        {
            // Its checkpoints and what it published are gone: a round could not build on
            // its work, and would push beside it.
            return Err(QueueError::conflict(
                id,
                locked.status,
                "its history was deleted (the server keeps it only so long): submit a new task",
            ));
        }
        let outcome = machine::follow_up(&mut locked, user_id, &job.payload, payload, start, now)?;
        tx.save_payload(&locked).await?;
        self.write_outcome(tx, &locked, outcome, now).await?;
        Ok(Some(locked))
    }

    /// Where round `round`, whose first step is `first_step`, starts: the branch the job
    /// pushed (its tip, when the worker finds it), and the job's latest checkpoint for when
    /// it does not. A retry from the round's first step starts here again, so a round never
    /// goes back behind what the job pushed.
    pub(crate) async fn round_start(
        &self,
        job: &Job,
        round: u32,
        first_step: usize,
    ) -> Result<CheckpointSaved, QueueError> {
        let timeline = self.timeline(&job.id, step_count(job)).await?;
        // Work of the steps before the round only: a retry of the round must not restore
        // its own later steps.
        let latest = timeline
            .checkpoints
            .into_iter()
            .rfind(|c| c.saved.after_step.is_none_or(|index| index < first_step));
        Ok(CheckpointSaved {
            after_step: None,
            after_iteration: None,
            base_commit: latest
                .as_ref()
                .map(|c| c.saved.base_commit.clone())
                .unwrap_or_default(),
            artifact: latest.map(|c| c.saved.artifact).unwrap_or_default(),
            steps_done: Some(first_step),
            round: Some(round),
            branch: self
                .publish_result(&job.id)
                .await
                .and_then(|p| p.branch.filter(|_| p.commit.is_some())),
        })
    }
}

/// Those of `causes` no round of the job took yet.
fn untaken(job: &Job, mut causes: Vec<String>) -> Vec<String> {
    if let Ok(task) = contract::NormalizedTask::from_job(job) {
        causes.retain(|c| !task.payload.task.took(c));
    }
    causes.dedup();
    causes
}

/// The round's steps from the request: `steps` as given, or one step of `instructions`.
fn round_steps(body: &Value) -> Result<Value, QueueError> {
    let Some(map) = body.as_object() else {
        return Err(QueueError::invalid(
            "",
            "expected an object: {\"steps\": [...]} or {\"instructions\": \"...\"}",
        ));
    };
    for key in map.keys() {
        if key != "steps" && key != "instructions" {
            return Err(QueueError::invalid(
                key,
                "unknown field; the accepted fields are steps, instructions",
            ));
        }
    }
    match (map.get("steps"), map.get("instructions")) {
        (Some(steps), None) => Ok(steps.clone()),
        (None, Some(Value::String(text))) if !text.trim().is_empty() => {
            Ok(json!([{ "instructions": text }]))
        }
        (None, Some(_)) => Err(QueueError::invalid(
            "instructions",
            "must be text saying what the follow-up should do",
        )),
        (Some(_), Some(_)) => Err(QueueError::invalid(
            "instructions",
            "give steps or instructions, not both",
        )),
        (None, None) => Err(QueueError::invalid(
            "steps",
            "required: the steps of the follow-up (or instructions, for one step)",
        )),
    }
}
