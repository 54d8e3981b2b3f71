//! How jobs read on a page: shaped on the server, so SSR and hydration show the same text.

use contract::StageState;
use contract::events::StepIndex;
use contract::job::task;
use contract::timeline::{StepState, Timeline};
use contract::{Job, NormalizedTask};

use crate::views::{ArtifactView, CancelView, EventView, JobRow, JobView, LogTail, StepView};

/// `2026-11-22 11:40 UTC`: minutes are enough in a list.
pub fn when(at: &impl std::fmt::Display) -> String {
    cut_time(at, 16)
}

/// `2026-11-22 11:40:05 UTC`: an event's time, to the second.
pub fn when_exact(at: &impl std::fmt::Display) -> String {
    cut_time(at, 19)
}

/// chrono's Display (`2026-11-22 11:40:05.123 UTC`) cut after `len` characters.
fn cut_time(at: &impl std::fmt::Display, len: usize) -> String {
    let text = at.to_string();
    match (text.get(..len), text.ends_with("UTC")) {
        (Some(kept), true) => format!("{kept} UTC"),
        _ => text,
    }
}

/// The events a job page lists at most, newest last.
pub const EVENTS_SHOWN: usize = 200;

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

/// When a running job started (ms since the epoch): its duration counts on in the page.
fn running_since(job: &Job) -> Option<i64> {
    job.started_at
        .filter(|_| job.status == contract::JobState::Running && job.finished_at.is_none())
        .map(|t| t.timestamp_millis())
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

/// For a queued job that no connected worker can run, why: when it may start, which
/// capabilities are missing (or that no worker is connected at all), so it is never
/// silently stuck.
pub fn waiting(
    job: &Job,
    workers: &[queue::WorkerRecord],
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    if job.status != contract::JobState::Queued {
        return None;
    }
    // Scheduled (`notBefore`), or retried after a delay: no worker may take it yet.
    if job.next_attempt_at > now {
        let what = if job.attempt == 0 {
            "it is scheduled to start"
        } else {
            "its next attempt starts"
        };
        return Some(format!("{what} at {}", when(&job.next_attempt_at)));
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
        id: job.id.to_string(),
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
        since: running_since(job),
        usage: job.usage.map(|u| u.compact()).unwrap_or_default(),
        waiting,
        needs_attention: false,
    }
}

/// What the job page is built from: the job, its timeline without log lines (the
/// milestones, which the events table lists too), its newest events of every kind (for the
/// output box), how many milestones it has, and its artifacts.
pub struct JobData<'a> {
    pub job: &'a Job,
    pub milestones: &'a [contract::JobEvent],
    pub latest: &'a [contract::JobEvent],
    pub events_total: u64,
    pub artifacts: &'a [contract::Artifact],
}

/// Lines of a step's output the page shows at most.
pub const TAIL_LINES: usize = 200;

/// Appends the milestones among `latest` (the newest events, read after `milestones`) that
/// are newer than the last one read. The page's stream resumes after the newest event of
/// either read, so a step that started between the two reads would otherwise show pending
/// until some later milestone reloaded the page.
pub fn catch_up_milestones(
    milestones: &mut Vec<contract::JobEvent>,
    latest: &[contract::JobEvent],
) {
    let last = milestones.last().map_or(0, |e| e.id);
    milestones.extend(
        latest
            .iter()
            .filter(|e| e.id > last && e.kind != task::STEP_LOG)
            .cloned(),
    );
}

/// The job page's data: header facts, the step timeline (the contract's fold of the step
/// and stage events), the newest output of the latest step, artifacts with their links,
/// and the newest events.
pub fn job_view(data: JobData<'_>, now_ms: i64, waiting: Option<String>) -> JobView {
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
    let resolved = task
        .as_ref()
        .map(|t| t.resolved_steps())
        .unwrap_or_default();
    let timeline = Timeline::from_events(resolved.len(), events);
    // A job that ended will run nothing more: what never started was skipped. (One that
    // awaits approval publishes once approved.)
    let ended = job.status.is_terminal() && job.status != contract::JobState::AwaitingApproval;
    let step_state = |state: StepState| match state {
        StepState::Pending if ended => StepState::Skipped,
        state => state,
    };
    let steps: Vec<StepView> = resolved
        .into_iter()
        .zip(&timeline.steps)
        .map(|(s, progress)| StepView {
            index: s.index,
            number: s.index + 1,
            title: s
                .title
                .clone()
                .or_else(|| s.instructions.as_deref().map(title))
                .unwrap_or_else(|| format!("Step {}", s.index + 1)),
            skill: s.effective_skill.clone(),
            state: step_state(progress.state),
            duration: progress
                .duration_ms(now_ms)
                .map(duration)
                .unwrap_or_default(),
            since: progress
                .started_at
                .filter(|_| progress.state == StepState::Running)
                .map(|t| t.timestamp_millis()),
            usage: progress.usage.map(|u| u.summary()).unwrap_or_default(),
            log: artifact(&task::step_log(s.index)),
            patch: artifact(&task::step_patch(s.index)),
            verdict: String::new(),
            passed: false,
            check_log: None,
        })
        .collect();

    // The output of the step that runs, else of the last one that ran.
    let tail = timeline.latest_started().map(|i| {
        let mut lines: Vec<String> = latest
            .iter()
            .filter(|e| e.kind == task::STEP_LOG && StepIndex::of(e) == Some(i))
            .flat_map(|e| e.message.lines().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let cut = lines.len().saturating_sub(TAIL_LINES);
        lines.drain(..cut);
        LogTail {
            step_index: i,
            title: format!("{}. {}", steps[i].number, steps[i].title),
            running: steps[i].state == StepState::Running,
            lines,
        }
    });

    let check = task
        .as_ref()
        .and_then(|t| t.payload.task.completion.as_ref())
        .filter(|c| c.check().is_some());
    let iterations: Vec<StepView> = match check {
        None => Vec::new(),
        Some(_) => timeline
            .iterations
            .iter()
            .map(|it| StepView {
                index: it.iteration as usize,
                number: it.iteration as usize,
                title: if it.iteration == 0 {
                    "Check of the steps' work".into()
                } else {
                    format!("Iteration {}", it.iteration)
                },
                skill: String::new(),
                state: it.state,
                verdict: it.verdict(),
                passed: it.check.as_ref().is_some_and(|c| c.passed),
                duration: match (it.started_at, it.ended_at) {
                    (Some(from), Some(to)) => duration((to - from).num_milliseconds()),
                    (Some(from), None) => duration(now_ms - from.timestamp_millis()),
                    _ => String::new(),
                },
                since: it
                    .started_at
                    .filter(|_| it.state == StepState::Running)
                    .map(|t| t.timestamp_millis()),
                usage: it.usage.map(|u| u.summary()).unwrap_or_default(),
                log: artifact(&task::iteration_log(it.iteration)),
                check_log: artifact(&task::check_log(it.iteration)),
                patch: artifact(&task::iteration_patch(it.iteration)),
            })
            .collect(),
    };

    let stages = timeline
        .stages()
        .map(|(stage, state)| {
            let short = short_stage(stage);
            let state = match state {
                StageState::Pending if ended => StageState::Skipped,
                state => state,
            };
            (short.to_string(), state)
        })
        .collect();

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
        fact(
            "Feedback",
            course::feedback(task.as_ref()).unwrap_or_default(),
        );
        if let Some(c) = &spec.completion {
            fact("Done when", c.criteria.clone().unwrap_or_default());
            if let Some(command) = c.check() {
                fact(
                    "Check",
                    format!(
                        "{command} (after the steps; the agent runs again while it fails, up to {} times)",
                        c.max_iterations
                    ),
                );
            }
        }
    }
    // Each checkpoint's patch is in the artifacts, under checkpoints/.
    let checkpoints: Vec<String> = timeline
        .checkpoints
        .iter()
        .map(|c| c.label.clone())
        .collect();
    fact("Checkpoints", checkpoints.join(", "));
    // Each attempt after the first says where it started: from scratch, or a checkpoint.
    let resumed = timeline
        .attempts
        .last()
        .and_then(|a| a.resumed_from.clone())
        .map(|label| format!(", resumed {label}"))
        .unwrap_or_default();
    fact(
        "Attempt",
        format!("{} of {}{resumed}", job.attempt, job.max_attempts),
    );
    if let Some(round) = course::round(job, task.as_ref()) {
        fact("Round", round);
    }
    if let Some(why) = course::paused(job) {
        fact("Paused", why);
    }
    let running = job.status == contract::JobState::Running;
    if let Some(pause) = job.pause_requested.as_ref().filter(|_| running) {
        let how = if pause.immediate {
            "the running step is being stopped"
        } else {
            "it pauses after the running step"
        };
        let by = pause.requested_by.as_deref().unwrap_or("someone");
        fact(
            "Pause",
            format!("requested by {by} at {}: {how}", when(&pause.requested_at)),
        );
    }
    let waits = matches!(
        job.status,
        contract::JobState::Paused | contract::JobState::Queued
    );
    if let Some(saved) = job.resume_from.as_ref().filter(|_| waits) {
        fact("Resumes", format!("{}, from its checkpoint", saved.label()));
    }
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
    fact(crate::views::DURATION_FACT, run_time(job, now_ms));
    // Retention left the row and this one event: say why the steps show no progress.
    if let Some(at) = events
        .iter()
        .rev()
        .find(|e| e.kind == contract::job::events::JOB_HISTORY_DELETED)
        .map(|e| when(&e.created_at))
    {
        fact(
            "History",
            format!(
                "its steps' events, logs and artifacts were deleted at {at}, as the server keeps them only so long"
            ),
        );
    }
    fact("Result", job.result_summary.clone().unwrap_or_default());
    fact(
        "Error",
        plain_stage_names(job.error_message.as_deref().unwrap_or_default()),
    );

    let title = job_title(job, task.as_ref());
    let objective = task
        .as_ref()
        .map(|t| t.payload.task.instructions.clone())
        .unwrap_or_default();
    JobView {
        id: job.id.to_string(),
        status: job.status,
        // The heading says a one-line objective already.
        objective: if objective.trim() == title {
            String::new()
        } else {
            objective
        },
        title,
        facts,
        since: running_since(job),
        steps,
        usage: job.usage.map(|u| u.summary()).unwrap_or_default(),
        budget: course::budget(job, task.as_ref()),
        stages,
        waiting,
        cancel: job.cancel_requested_at.map(|at| CancelView {
            requested: when(&at),
            by: job.cancel_requested_by_user_id.clone().unwrap_or_default(),
            reason: job.cancel_reason.clone().unwrap_or_default(),
        }),
        artifacts: artifacts
            .iter()
            // A step that changed nothing leaves an empty patch: nothing to list. The
            // changes kept for approval are listed even when empty, to say so.
            .filter(|a| a.size > 0 || !a.name.ends_with(".patch") || a.name == task::CHANGES_PATCH)
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
        iterations,
        events_total,
        // The milestones: the log lines are in the output box and each step's log.
        events: events[events.len().saturating_sub(EVENTS_SHOWN)..]
            .iter()
            .map(|e| EventView {
                id: e.id,
                when: when_exact(&e.created_at),
                level: e.level.as_str().to_string(),
                kind: e.kind.clone(),
                message: plain_stage_names(&e.message),
            })
            .collect(),
    }
}

/// `text` with the stages' wire names (`moonmind.task.prepare`, kept on the wire for the
/// seed system's clients) as a person reads them: `prepare`.
pub fn plain_stage_names(text: &str) -> String {
    task::STAGES.iter().fold(text.to_string(), |text, stage| {
        text.replace(stage, short_stage(stage))
    })
}

/// `moonmind.task.prepare` as a person reads it: `prepare`.
fn short_stage(stage: &str) -> &str {
    stage.rsplit('.').next().unwrap_or(stage)
}

mod course;
#[cfg(test)]
mod tests;
