//! How jobs read on a page: shaped on the server, so SSR and hydration show the same text.

use contract::{Job, NormalizedTask};

use crate::pages::queue::JobRow;

/// `2026-11-22 11:40 UTC`.
pub fn when(at: &impl std::fmt::Display) -> String {
    let text = at.to_string();
    // chrono's Display is `2026-11-22 11:40:05.123 UTC`; minutes are enough in a list.
    match (text.get(..16), text.ends_with("UTC")) {
        (Some(minutes), true) => format!("{minutes} UTC"),
        _ => text,
    }
}

/// `1h 02m`, `3m 07s`, `12.3s`, `450ms`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m {:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h {:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// How long the job has run: start to finish, or to `now` while it runs.
pub fn run_time(job: &Job, now_ms: i64) -> String {
    match job.started_at {
        Some(start) => {
            let end = job.finished_at.map_or(now_ms, |f| f.timestamp_millis());
            duration(end - start.timestamp_millis())
        }
        None => String::new(),
    }
}

pub fn title(objective: &str) -> String {
    let first = objective
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut title: String = first.chars().take(120).collect();
    if first.chars().count() > 120 {
        title.push('…');
    }
    title
}

/// For a queued job that no connected worker can run, why: which capabilities are missing
/// (or that no worker is connected at all), so it is never silently stuck.
pub fn waiting(
    job: &Job,
    workers: &[queue::WorkerRecord],
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    if job.status != contract::JobState::Queued {
        return None;
    }
    let missing = queue::missing_capabilities(&job.required_capabilities, workers, now)?;
    if !workers.iter().any(|w| w.is_live(now)) {
        return Some(
            "no worker is connected: start `stepwise worker` on a machine with the agent CLIs, \
             or `stepwise serve` with its embedded worker"
                .into(),
        );
    }
    Some(format!("no connected worker has: {}", missing.join(", ")))
}

/// The objective's first line; a job that is not a task shows its type.
fn job_title(job: &Job, task: Option<&NormalizedTask>) -> String {
    task.map(|t| title(&t.payload.task.instructions))
        .unwrap_or_else(|| job.job_type.clone())
}

pub fn row(job: &Job, now_ms: i64, waiting: Option<String>, steps_done: u32) -> JobRow {
    let task = NormalizedTask::from_job(job).ok();
    JobRow {
        id: job.id.clone(),
        status: job.status,
        title: job_title(job, task.as_ref()),
        repository: task
            .as_ref()
            .map(|t| t.payload.repository.clone())
            .unwrap_or_default(),
        runtime: task
            .as_ref()
            .map(|t| t.payload.task.runtime.mode.as_str().to_string())
            .unwrap_or_default(),
        steps: task.as_ref().map_or(0, |t| t.resolved_steps().len()),
        steps_done,
        created: when(&job.created_at),
        duration: run_time(job, now_ms),
        usage: job.usage.map(|u| u.compact()).unwrap_or_default(),
        waiting,
    }
}

/// What the job page is built from: the job, its timeline without log lines (the
/// milestones), its newest events of every kind, and its artifacts.
pub struct JobData<'a> {
    pub job: &'a Job,
    pub milestones: &'a [contract::JobEvent],
    pub latest: &'a [contract::JobEvent],
    pub events_total: u64,
    pub artifacts: &'a [contract::Artifact],
}

/// Lines of a step's output the page shows at most.
pub const TAIL_LINES: usize = 200;

/// The job page's data: header facts, the step timeline from the step events, the newest
/// output of the latest step, artifacts with their links, and the newest events.
pub fn job_view(
    data: JobData<'_>,
    now_ms: i64,
    waiting: Option<String>,
) -> crate::pages::job::JobView {
    use contract::job::task;

    use crate::pages::job::{ArtifactView, CancelView, EventView, JobView, LogTail, StepView};

    let JobData {
        job,
        milestones: events,
        latest,
        events_total,
        artifacts,
    } = data;
    let task = NormalizedTask::from_job(job).ok();
    let view_href = |artifact_id: &str| format!("/tasks/queue/{}/artifacts/{artifact_id}", job.id);
    // An empty patch (a step that changed nothing) gets no link.
    let artifact = |name: &str| {
        artifacts
            .iter()
            .find(|a| a.name == name && (a.size > 0 || !name.ends_with(".patch")))
            .map(|a| view_href(&a.id))
    };
    let mut steps: Vec<StepView> = task
        .as_ref()
        .map(|t| t.resolved_steps())
        .unwrap_or_default()
        .into_iter()
        .map(|s| StepView {
            index: s.index,
            number: s.index + 1,
            title: s
                .title
                .clone()
                .or_else(|| s.instructions.as_deref().map(title))
                .unwrap_or_else(|| format!("Step {}", s.index + 1)),
            skill: s.effective_skill.clone(),
            state: "pending".into(),
            duration: String::new(),
            usage: String::new(),
            log: artifact(&task::step_log(s.index)),
            patch: artifact(&task::step_patch(s.index)),
        })
        .collect();
    let mut started = vec![None; steps.len()];
    for event in events {
        let Some(index) = event.payload.get("stepIndex").and_then(|i| i.as_u64()) else {
            continue;
        };
        let index = index as usize;
        let Some(step) = steps.get_mut(index) else {
            continue;
        };
        let at = event.created_at.timestamp_millis();
        let state = match event.kind.as_str() {
            task::STEP_STARTED => {
                started[index] = Some(at);
                "running"
            }
            task::STEP_FINISHED => "succeeded",
            task::STEP_FAILED => "failed",
            task::STEP_CANCELLED => "cancelled",
            _ => continue,
        };
        step.state = state.into();
        // What the step's latest run used: a retried step starts over, and an end without
        // usage (or with one the queue refused) shows none.
        step.usage = contract::StepUsage::of_step_event(&event.kind, &event.payload)
            .ok()
            .flatten()
            .map(|u| u.summary())
            .unwrap_or_default();
        if let (Some(start), true) = (started[index], state != "running") {
            step.duration = duration(at - start);
        }
    }
    for (step, start) in steps.iter_mut().zip(&started) {
        if let (Some(start), "running") = (start, step.state.as_str()) {
            step.duration = duration(now_ms - start);
        }
    }

    // The output of the step that runs, else of the last one that ran.
    let tail = started
        .iter()
        .enumerate()
        .filter_map(|(i, at)| at.map(|at| (i, at)))
        .max_by_key(|(_, at)| *at)
        .map(|(i, _)| {
            let mut lines: Vec<String> = latest
                .iter()
                .filter(|e| {
                    e.kind == task::STEP_LOG
                        && e.payload.get("stepIndex").and_then(|v| v.as_u64()) == Some(i as u64)
                })
                .flat_map(|e| e.message.lines().map(str::to_string).collect::<Vec<_>>())
                .collect();
            let cut = lines.len().saturating_sub(TAIL_LINES);
            lines.drain(..cut);
            LogTail {
                step_index: i,
                title: format!("{}. {}", steps[i].number, steps[i].title),
                running: steps[i].state == "running",
                lines,
            }
        });

    let mut stages: Vec<(String, String)> = task::STAGES
        .iter()
        .map(|s| {
            (
                s.rsplit('.').next().unwrap_or(s).to_string(),
                "pending".to_string(),
            )
        })
        .collect();
    for event in events {
        let Some(stage) = event.payload.get("stage").and_then(|s| s.as_str()) else {
            continue;
        };
        let Some(i) = task::STAGES.iter().position(|s| *s == stage) else {
            continue;
        };
        let state = match event.kind.as_str() {
            task::STAGE_STARTED => "running",
            task::STAGE_FINISHED => event
                .payload
                .get("outcome")
                .and_then(|o| o.as_str())
                .unwrap_or("succeeded"),
            _ => continue,
        };
        stages[i].1 = state.to_string();
    }

    let mut facts = Vec::new();
    let mut fact = |name: &str, value: String| {
        if !value.is_empty() {
            facts.push((name.to_string(), value));
        }
    };
    if let Some(t) = &task {
        let spec = &t.payload.task;
        fact("Repository", t.payload.repository.clone());
        let runtime = [
            Some(spec.runtime.mode.as_str().to_string()),
            spec.runtime.model.clone(),
            spec.runtime.effort.clone(),
        ];
        fact(
            "Runtime",
            runtime
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" · "),
        );
        let branch = match (&spec.git.starting_branch, &spec.git.new_branch) {
            (Some(from), Some(to)) => format!("{to} from {from}"),
            (None, Some(to)) => format!("{to} from the default branch"),
            (Some(from), None) => format!("a new task/… branch from {from}"),
            (None, None) => "a new task/… branch from the default branch".into(),
        };
        fact("Branch", branch);
        fact("Publish", spec.publish.mode.as_str().to_string());
    }
    fact(
        "Attempt",
        format!("{} of {}", job.attempt, job.max_attempts),
    );
    fact("Worker", job.claimed_by.clone().unwrap_or_default());
    fact("Created", when(&job.created_at));
    fact(
        "Started",
        job.started_at.map(|t| when(&t)).unwrap_or_default(),
    );
    fact(
        "Finished",
        job.finished_at.map(|t| when(&t)).unwrap_or_default(),
    );
    fact("Duration", run_time(job, now_ms));
    fact("Result", job.result_summary.clone().unwrap_or_default());
    fact("Error", job.error_message.clone().unwrap_or_default());

    JobView {
        id: job.id.clone(),
        status: job.status,
        title: job_title(job, task.as_ref()),
        objective: task
            .as_ref()
            .map(|t| t.payload.task.instructions.clone())
            .unwrap_or_default(),
        facts,
        steps,
        usage: job.usage.map(|u| u.summary()).unwrap_or_default(),
        stages,
        waiting,
        cancel: job.cancel_requested_at.map(|at| CancelView {
            requested: when(&at),
            by: job.cancel_requested_by_user_id.clone().unwrap_or_default(),
            reason: job.cancel_reason.clone().unwrap_or_default(),
        }),
        artifacts: artifacts
            .iter()
            .map(|a| ArtifactView {
                name: a.name.clone(),
                size: a.size,
                href: view_href(&a.id),
                download: format!("/api/queue/jobs/{}/artifacts/{}/download", job.id, a.id),
            })
            .collect(),
        tail,
        last_event_id: events
            .last()
            .map_or(0, |e| e.id)
            .max(latest.last().map_or(0, |e| e.id)),
        may_cancel: false,
        events_total,
        events: latest
            .iter()
            .map(|e| EventView {
                id: e.id,
                when: when(&e.created_at),
                level: e.level.as_str().to_string(),
                kind: e.kind.clone(),
                message: e.message.clone(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
