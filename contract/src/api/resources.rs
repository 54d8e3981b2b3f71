//! A job as seed 003 (Ralph) describes a task resource: what MCP serves at
//! `stepwise://tasks/{id}`. The keys are seed 003's, snake_case, and kept exactly.
//!
//! A task with a completion check counts its loop's iterations: `iteration` is the latest
//! (0 is the check of the steps' work), `max_iterations` the task's limit. A task without
//! one counts its steps: `iteration` is the step running or last run (1-based, 0 before
//! any), `max_iterations` the number of steps.

use serde::{Deserialize, Serialize};

use crate::checklist::ChecklistLabel;
use crate::job::{Artifact, Job, JobEvent, JobState};
use crate::model::NormalizedTask;
use crate::states::StepState;
use crate::text::first_line;
use crate::timeline::Timeline;

/// The URI scheme and prefix of a task resource; a task is `{TASKS_URI}/{id}`.
pub const TASKS_URI: &str = "stepwise://tasks";

/// The URI of a job's task resource.
pub fn task_uri(job: &Job) -> String {
    format!("{TASKS_URI}/{}", job.id)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResource {
    pub uri: String,
    /// The objective's first line.
    pub name: String,
    /// The whole objective.
    pub description: String,
    /// What "done" means, in words, when the task says.
    pub completion_criteria: Option<String>,
    pub state: TaskResourceState,
    pub progress: TaskResourceProgress,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub metadata: TaskResourceMetadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResourceState {
    pub iteration: u32,
    pub max_iterations: u32,
    pub status: TaskStatus,
    /// The last step that finished, by its title.
    pub last_action: Option<String>,
    /// The steps still to run, by title, in order.
    pub next_steps: Vec<String>,
    pub error: Option<TaskResourceError>,
}

/// Seed 003's task states, read from the job's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Pending,
    Running,
    Paused,
    Completed,
    Failed,
    Cancelled,
}

impl From<JobState> for TaskStatus {
    fn from(state: JobState) -> TaskStatus {
        match state {
            JobState::Queued => TaskStatus::Pending,
            JobState::Running => TaskStatus::Running,
            // Stopped until an operator acts, as a paused task is.
            JobState::Paused | JobState::AwaitingApproval => TaskStatus::Paused,
            JobState::Succeeded => TaskStatus::Completed,
            JobState::Failed | JobState::DeadLetter => TaskStatus::Failed,
            JobState::Cancelled => TaskStatus::Cancelled,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResourceError {
    pub message: String,
    /// The job's state: `failed`, or `dead_letter` when its attempts ran out.
    pub code: String,
    /// Whether the queue will try it again by itself.
    pub recoverable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResourceProgress {
    /// Steps done out of all, 0 to 100.
    pub percentage: u8,
    pub message: String,
    /// The job's artifacts, by name.
    pub artifacts_created: Vec<String>,
    pub artifacts_modified: Vec<String>,
    /// The checkpoints saved so far, by id (`step-1`, `iteration-2`), oldest first.
    pub checkpoints: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResourceMetadata {
    pub created_by: Option<String>,
    pub priority: i32,
    /// The runtime and the publish mode.
    pub tags: Vec<String>,
}

impl TaskResource {
    /// The resource of `job` after its progress `events` (oldest first; log lines may be
    /// left out) with its `artifacts`; `message` is the line that sums it up.
    pub fn new(job: &Job, events: &[JobEvent], artifacts: &[Artifact], message: String) -> Self {
        let task = NormalizedTask::from_job(job).ok();
        let labels: Vec<String> = task
            .as_ref()
            .map(|t| {
                t.resolved_steps()
                    .iter()
                    .map(ChecklistLabel::checklist_label)
                    .collect()
            })
            .unwrap_or_default();
        let timeline = Timeline::from_events(labels.len(), events);
        let done = |s: &StepState| *s == StepState::Succeeded;
        let finished = timeline.steps.iter().filter(|s| done(&s.state)).count();
        let last_action = timeline
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| done(&s.state))
            .max_by_key(|(_, s)| s.ended_at)
            .map(|(i, _)| labels[i].clone());
        let completion = task
            .as_ref()
            .and_then(|t| t.payload.task.completion.as_ref());
        let check = completion.and_then(|c| c.check());
        let mut next_steps: Vec<String> = labels
            .iter()
            .zip(&timeline.steps)
            .filter(|(_, s)| matches!(s.state, StepState::Pending | StepState::Running))
            .map(|(label, _)| label.clone())
            .collect();
        if let Some(command) = check.filter(|_| !job.status.is_terminal()) {
            next_steps.push(format!(
                "run the completion check until it passes: {command}"
            ));
        }
        let latest = timeline.latest_iteration().filter(|_| check.is_some());
        let checked = timeline
            .iterations
            .iter()
            .rev()
            .filter(|_| check.is_some())
            .find_map(|it| it.check.as_ref().map(|c| (it, c)));
        let last_action = match checked {
            Some((it, result)) => Some(format!("iteration {}: {}", it.iteration, result.verdict())),
            None => last_action,
        };
        let total = labels.len().max(1);
        let percentage = if job.status == JobState::Succeeded {
            100
        } else {
            let steps = u8::try_from(finished * 100 / total).unwrap_or(100);
            // With a check, the steps done are not the task done.
            let check = task
                .as_ref()
                .and_then(|t| t.payload.task.completion.as_ref())
                .is_some_and(|c| c.check().is_some());
            if check { steps.min(99) } else { steps }
        };
        let objective = task
            .as_ref()
            .map(|t| t.payload.task.instructions.clone())
            .unwrap_or_default();
        let error = match job.status {
            JobState::Failed | JobState::DeadLetter => Some(TaskResourceError {
                message: job.error_message.clone().unwrap_or_default(),
                code: job.status.as_str().to_string(),
                recoverable: false,
            }),
            _ => None,
        };
        let tags = task
            .as_ref()
            .map(|t| {
                vec![
                    t.payload.task.runtime.mode.as_str().to_string(),
                    t.payload.task.publish.mode.as_str().to_string(),
                ]
            })
            .unwrap_or_default();
        TaskResource {
            uri: task_uri(job),
            name: first_line(&objective, NAME_CHARS),
            description: objective,
            completion_criteria: completion.and_then(|c| c.criteria.clone()),
            state: TaskResourceState {
                iteration: match (check, latest) {
                    (Some(_), Some(it)) => it.iteration,
                    (Some(_), None) => 0,
                    (None, _) => timeline
                        .latest_started()
                        .map_or(0, |i| u32::try_from(i + 1).unwrap_or(u32::MAX)),
                },
                max_iterations: match (check, completion) {
                    (Some(_), Some(c)) => c.max_iterations,
                    _ => u32::try_from(labels.len()).unwrap_or(u32::MAX),
                },
                status: job.status.into(),
                last_action,
                next_steps,
                error,
            },
            progress: TaskResourceProgress {
                percentage,
                message,
                artifacts_created: artifacts.iter().map(|a| a.name.clone()).collect(),
                artifacts_modified: Vec::new(),
                checkpoints: timeline.checkpoints.iter().map(|c| c.id.clone()).collect(),
            },
            created_at: job.created_at,
            updated_at: job.updated_at,
            metadata: TaskResourceMetadata {
                created_by: job.created_by_user_id.clone(),
                priority: job.priority,
                tags,
            },
        }
    }
}

/// How long a task's `name` may be: its objective's first line, cut.
const NAME_CHARS: usize = 120;

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeDelta, Utc};
    use serde_json::json;

    use super::*;
    use crate::job::task;
    use crate::{Defaults, JobId, normalize};

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_700_000_000_000).unwrap() + TimeDelta::milliseconds(ms)
    }

    fn job(steps: serde_json::Value) -> Job {
        let raw = json!({ "payload": { "repository": "octo/hello", "targetRuntime": "codex",
            "task": { "instructions": "Ship it\nwith care", "steps": steps } } });
        let task = normalize(&raw, &Defaults::default()).unwrap();
        let mut job = Job::queued(
            JobId::from(uuid::Uuid::nil()),
            serde_json::to_value(&task.payload).unwrap(),
            at(0),
        );
        job.status = JobState::Running;
        job
    }

    fn event(id: i64, kind: &str, step: usize) -> JobEvent {
        JobEvent {
            id,
            job_id: JobId::from(uuid::Uuid::nil()),
            level: crate::EventLevel::Info,
            kind: kind.to_string(),
            message: String::new(),
            payload: json!({ "stepIndex": step }).as_object().unwrap().clone(),
            created_at: at(id),
        }
    }

    #[test]
    fn a_running_task_reads_as_seed_003_says_with_its_steps_as_iterations() {
        let step = |title: &str| json!({ "title": title, "instructions": format!("{title} it") });
        let job = job(json!([step("Plan"), step("Build"), step("Test")]));
        let events = [
            event(1, task::STEP_STARTED, 0),
            event(2, task::STEP_FINISHED, 0),
            event(3, task::STEP_STARTED, 1),
        ];
        let resource = TaskResource::new(&job, &events, &[], "job … running".into());
        let value = serde_json::to_value(&resource).unwrap();
        assert_eq!(value["uri"], format!("stepwise://tasks/{}", job.id));
        assert_eq!(value["name"], "Ship it");
        assert_eq!(value["description"], "Ship it\nwith care");
        assert_eq!(value["completion_criteria"], json!(null));
        let state = &value["state"];
        assert_eq!(state["status"], "running");
        assert_eq!(
            (state["iteration"].clone(), state["max_iterations"].clone()),
            (json!(2), json!(3))
        );
        assert_eq!(state["last_action"], "Plan");
        assert_eq!(state["next_steps"], json!(["Build", "Test"]));
        assert_eq!(state["error"], json!(null));
        assert_eq!(value["progress"]["percentage"], 33);
        assert_eq!(value["progress"]["checkpoints"], json!([]));
        assert_eq!(value["metadata"]["tags"][0], "codex");
        for key in ["created_at", "updated_at"] {
            assert!(value[key].is_string(), "{key}");
        }
    }

    #[test]
    fn job_states_map_to_seed_003s_task_states() {
        let cases = [
            (JobState::Queued, "pending"),
            (JobState::Running, "running"),
            (JobState::Succeeded, "completed"),
            (JobState::Failed, "failed"),
            (JobState::DeadLetter, "failed"),
            (JobState::Cancelled, "cancelled"),
        ];
        for (state, status) in cases {
            let value = serde_json::to_value(TaskStatus::from(state)).unwrap();
            assert_eq!(value, status, "{state}");
        }
        let mut failed = job(json!([]));
        failed.status = JobState::DeadLetter;
        failed.error_message = Some("agent exited 1".into());
        let resource = TaskResource::new(&failed, &[], &[], String::new());
        let error = resource.state.error.unwrap();
        assert_eq!(
            (error.code.as_str(), error.message.as_str()),
            ("dead_letter", "agent exited 1")
        );
        assert_eq!(
            resource.state.max_iterations, 1,
            "no steps is one implicit step"
        );
    }

    #[test]
    fn a_task_with_a_check_counts_its_loops_iterations() {
        let mut job = job(json!([{ "instructions": "Fix it" }]));
        std::sync::Arc::make_mut(&mut job.payload)["task"]["completion"] = json!({ "criteria": "tests pass",
            "maxIterations": 3, "command": "make test" });
        let loop_event = |id: i64, kind: &str, payload: serde_json::Value| JobEvent {
            payload: payload.as_object().unwrap().clone(),
            ..event(id, kind, 0)
        };
        let events = [
            event(1, task::STEP_STARTED, 0),
            event(2, task::STEP_FINISHED, 0),
            loop_event(
                3,
                task::ITERATION_STARTED,
                json!({ "iteration": 0, "maxIterations": 3 }),
            ),
            loop_event(
                4,
                task::ITERATION_FINISHED,
                json!({ "iteration": 0, "maxIterations": 3,
                "outcome": "succeeded",
                "check": { "passed": false, "exitCode": 2, "outputTail": "", "durationMs": 5 } }),
            ),
            loop_event(
                5,
                task::ITERATION_STARTED,
                json!({ "iteration": 1, "maxIterations": 3 }),
            ),
        ];
        let resource = TaskResource::new(&job, &events, &[], "job … running".into());
        assert_eq!(resource.completion_criteria.as_deref(), Some("tests pass"));
        let state = &resource.state;
        assert_eq!((state.iteration, state.max_iterations), (1, 3));
        assert_eq!(
            state.last_action.as_deref(),
            Some("iteration 0: the check failed (exit code 2)")
        );
        assert_eq!(
            state.next_steps,
            ["run the completion check until it passes: make test"]
        );
    }
}
