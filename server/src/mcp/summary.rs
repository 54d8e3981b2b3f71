//! How a job reads to a model: one line of text (`job … running, step 2/3: Implement
//! code and tests`) beside the job itself, and the view MCP answers with (`JobView`): the
//! job, its steps as the timeline tells them, and that line.

use contract::api::resources::task_uri;
use contract::checklist::ChecklistLabel;
use contract::text::first_line;
use contract::timeline::{StepState, Timeline};
use contract::{Job, JobEvent, JobState, NormalizedTask};
use serde::Serialize;

use super::desk::Desk;

/// How much of a detail (a result, an error) the summary line holds: a model reads the
/// rest in the structured content.
const DETAIL_CHARS: usize = 200;

/// A job as MCP tools answer it: `structuredContent` is this object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    /// The line the text content holds too.
    pub summary: String,
    pub job: Job,
    /// Each step's label and state, in order; absent when the events were not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepView>>,
    /// Its page in the dashboard, when the server's address is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
    /// Its task resource, `stepwise://tasks/{id}`.
    pub resource: String,
    /// Its artifacts, each a resource to read (a task's final result lists them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<ArtifactLink>>,
}

/// An artifact of a job, and the resource that reads it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactLink {
    pub name: String,
    pub size: u64,
    /// `stepwise://tasks/{id}/artifacts/{name}`.
    pub resource: String,
}

impl ArtifactLink {
    pub fn of(artifact: &contract::Artifact) -> ArtifactLink {
        ArtifactLink {
            name: artifact.name.clone(),
            size: artifact.size,
            resource: format!(
                "{}/{}/artifacts/{}",
                contract::api::resources::TASKS_URI,
                artifact.job_id,
                artifact.name
            ),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    pub title: String,
    pub state: StepState,
}

/// Where a job is, from its progress events (oldest first).
pub struct Progress {
    labels: Vec<String>,
    timeline: Timeline,
}

impl Progress {
    /// `None` for a job whose payload is not a task this build reads.
    pub fn of(job: &Job, events: &[JobEvent]) -> Option<Progress> {
        let task = NormalizedTask::from_job(job).ok()?;
        let labels: Vec<String> = task
            .resolved_steps()
            .iter()
            .map(ChecklistLabel::checklist_label)
            .collect();
        let timeline = Timeline::from_events(labels.len(), events);
        Some(Progress { labels, timeline })
    }

    fn steps(&self) -> Vec<StepView> {
        self.labels
            .iter()
            .zip(&self.timeline.steps)
            .map(|(title, step)| StepView {
                title: title.clone(),
                state: step.state,
            })
            .collect()
    }

    /// `step 2/3: Implement code + tests`: the step running, else the last one that ran;
    /// once the completion loop has begun, `iteration 2/10: the check failed (exit code 1)`.
    fn current(&self) -> Option<String> {
        if let Some(it) = self.timeline.latest_iteration() {
            let what = it.verdict();
            return Some(format!(
                "iteration {}/{}: {what}",
                it.iteration, it.max_iterations
            ));
        }
        let i = self.timeline.latest_started()?;
        Some(format!(
            "step {}/{}: {}",
            i + 1,
            self.labels.len(),
            self.labels[i]
        ))
    }

    fn done(&self) -> usize {
        self.timeline
            .steps
            .iter()
            .filter(|s| s.state == StepState::Succeeded)
            .count()
    }
}

impl JobView {
    pub fn new(job: Job, progress: Option<&Progress>) -> JobView {
        JobView {
            summary: line(&job, progress),
            steps: progress.map(Progress::steps),
            page: None,
            resource: task_uri(&job),
            artifacts: None,
            job,
        }
    }

    /// With the link to its page, as `desk`'s caller reaches the server.
    pub fn linked(mut self, desk: &Desk) -> JobView {
        self.page = desk.page_url(&self.job.id);
        self
    }
}

/// One line a model can act on: the id, the state and what it is doing or how it ended.
pub fn line(job: &Job, progress: Option<&Progress>) -> String {
    let head = format!("job {} {}", job.id, job.status);
    let steps = progress.map(|p| p.labels.len()).unwrap_or(0);
    let detail = match job.status {
        JobState::Queued => Some(format!(
            "{steps} step{} waiting for a worker",
            if steps == 1 { "" } else { "s" }
        )),
        JobState::Running if job.cancel_requested_at.is_some() => {
            Some("cancel requested, waiting for the worker to stop".to_string())
        }
        JobState::Running if job.pause_requested.is_some() => {
            Some("pause requested, waiting for the worker to stop".to_string())
        }
        JobState::AwaitingApproval => Some(
            "the steps are done; awaiting an operator's approval before publishing".to_string(),
        ),
        JobState::Paused => Some(match &job.resume_from {
            Some(saved) => format!("paused; resuming continues {}", saved.label()),
            None => "paused; resuming starts from the beginning".to_string(),
        }),
        JobState::Running => progress.map(|p| {
            p.current()
                .unwrap_or_else(|| "preparing the workspace".to_string())
        }),
        JobState::Succeeded => Some(
            job.result_summary
                .clone()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| {
                    let done = progress.map(Progress::done).unwrap_or(steps);
                    format!("{done}/{steps} steps done")
                }),
        ),
        JobState::Failed | JobState::DeadLetter => job
            .error_message
            .clone()
            .or_else(|| progress.and_then(Progress::current)),
        JobState::Cancelled => job
            .cancel_reason
            .clone()
            .map(|reason| format!("reason: {reason}")),
    };
    match detail {
        Some(detail) => format!("{head}, {}", first_line(&detail, DETAIL_CHARS)),
        None => head,
    }
}

/// A job with the summary line and steps its progress events tell.
pub(super) async fn job_view(
    desk: &Desk,
    id: &contract::JobId,
) -> Result<JobView, contract::api::ErrorBody> {
    let job = desk.job(id).await?;
    let events = desk.progress_events(id).await?;
    let progress = Progress::of(&job, &events);
    Ok(JobView::new(job, progress.as_ref()).linked(desk))
}
