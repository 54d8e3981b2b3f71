//! How jobs and events look in a terminal. The payload is read as plain JSON, not as the
//! contract's `Payload`, so a job from a newer server with fields this build does not know
//! still renders.

use std::fmt::Write as _;

use chrono::{DateTime, Datelike, Timelike, Utc};
use contract::text::first_line;
use contract::{Job, JobEvent};
use serde_json::Value;

/// The widest objective a table row shows before cutting it with `…`.
const OBJECTIVE_WIDTH: usize = 48;

/// `2026-02-17 10:00` (UTC); the table has no room for seconds.
fn minute(at: &DateTime<Utc>) -> String {
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute()
    )
}

/// `2026-02-17 10:00:05 UTC`.
fn second(at: &DateTime<Utc>) -> String {
    format!("{}:{:02} UTC", minute(at), at.second())
}

fn text<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

fn repository(job: &Job) -> &str {
    text(&job.payload, &["repository"]).unwrap_or("-")
}

fn steps(job: &Job) -> &[Value] {
    job.payload
        .get("task")
        .and_then(|t| t.get("steps"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A task without steps runs as one implicit step.
fn step_count(job: &Job) -> usize {
    steps(job).len().max(1)
}

/// Jobs as an aligned table: id, status, created, repository, steps, usage, objective.
pub fn job_table(jobs: &[Job]) -> String {
    let header = [
        "ID",
        "STATUS",
        "CREATED (UTC)",
        "REPOSITORY",
        "STEPS",
        "USAGE",
        "OBJECTIVE",
    ];
    let rows: Vec<[String; 7]> = jobs
        .iter()
        .map(|job| {
            [
                job.id.to_string(),
                job.status.to_string(),
                minute(&job.created_at),
                repository(job).to_string(),
                step_count(job).to_string(),
                job.usage.map(|u| u.compact()).unwrap_or_default(),
                first_line(
                    text(&job.payload, &["task", "instructions"]).unwrap_or(""),
                    OBJECTIVE_WIDTH,
                ),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    let header = header.map(String::from);
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            let pad = width - cell.chars().count();
            match i {
                // Counts read best right-aligned.
                4 => {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
                6 => line.push_str(cell),
                _ => {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                }
            }
            if i < 6 {
                line.push_str("  ");
            }
        }
        table.push_str(line.trim_end());
        table.push('\n');
    }
    table
}

/// One job, field by field; only what is set is shown.
pub fn job_summary(job: &Job) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("job", job.id.to_string()),
        ("type", job.job_type.clone()),
        (
            "status",
            format!(
                "{} (attempt {} of {})",
                job.status, job.attempt, job.max_attempts
            ),
        ),
        ("repository", repository(job).to_string()),
    ];
    let runtime: Vec<String> = [
        text(&job.payload, &["task", "runtime", "mode"]).map(str::to_string),
        text(&job.payload, &["task", "runtime", "model"]).map(|m| format!("model {m}")),
        text(&job.payload, &["task", "runtime", "effort"]).map(|e| format!("effort {e}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !runtime.is_empty() {
        rows.push(("runtime", runtime.join(", ")));
    }
    if let Some(mode) = text(&job.payload, &["task", "publish", "mode"]) {
        rows.push(("publish", mode.to_string()));
    }
    if let Some(skill) = text(&job.payload, &["task", "skill", "id"]) {
        rows.push(("skill", skill.to_string()));
    }
    rows.push(("created", second(&job.created_at)));
    if let Some(by) = &job.created_by_user_id {
        rows.push(("created by", by.clone()));
    }
    if job.status == contract::JobState::Queued && job.next_attempt_at > job.created_at {
        rows.push(("next try", second(&job.next_attempt_at)));
    }
    if let Some(at) = &job.started_at {
        rows.push(("started", second(at)));
    }
    if let Some(at) = &job.finished_at {
        rows.push(("finished", second(at)));
    }
    if let Some(worker) = &job.claimed_by {
        let lease = match (&job.lease_expires_at, job.status.is_terminal()) {
            (Some(until), false) => format!(", lease until {}", second(until)),
            _ => String::new(),
        };
        rows.push(("claimed by", format!("{worker}{lease}")));
    }
    if let Some(at) = &job.cancel_requested_at {
        let mut cancel = format!("requested {}", second(at));
        if let Some(by) = &job.cancel_requested_by_user_id {
            let _ = write!(cancel, " by {by}");
        }
        if let Some(reason) = &job.cancel_reason {
            let _ = write!(cancel, ": {reason}");
        }
        rows.push(("cancel", cancel));
    }
    if let Some(result) = &job.result_summary {
        rows.push(("result", result.clone()));
    }
    if let Some(error) = &job.error_message {
        rows.push(("error", error.clone()));
    }
    // What the CLIs reported, summed over every step that ran; nothing when none did.
    if let Some(usage) = job.usage.filter(|u| !u.is_empty()) {
        rows.push(("usage", usage.summary()));
    }
    if let Some(budget) = job.budget() {
        let spent = if job.budget_overrun().is_some() {
            " (spent)"
        } else {
            ""
        };
        rows.push((
            "budget",
            format!("{}{spent}", budget.summary(&job.usage.unwrap_or_default())),
        ));
    }
    if job.round > 1 {
        rows.push(("round", job.round.to_string()));
    }
    if let Some(reason) = job.pause_reason {
        rows.push(("paused for", reason.to_string()));
    }
    if let Some(objective) = text(&job.payload, &["task", "instructions"]) {
        rows.push(("objective", objective.trim().to_string()));
    }
    if let Some(criteria) = text(&job.payload, &["task", "completion", "criteria"]) {
        rows.push(("done when", criteria.trim().to_string()));
    }
    if let Some(check) = text(&job.payload, &["task", "completion", "command"]) {
        let max = job.payload["task"]["completion"]["maxIterations"]
            .as_u64()
            .unwrap_or(0);
        rows.push((
            "check",
            format!(
                "{check}\n(after the steps; the agent runs again while it fails, up to {max} times)"
            ),
        ));
    }
    let steps = steps(job);
    if !steps.is_empty() {
        let lines: Vec<String> = steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                let id = text(step, &["id"]).unwrap_or("-");
                let what = text(step, &["title"])
                    .or_else(|| text(step, &["instructions"]))
                    .or_else(|| text(step, &["skill", "id"]).map(|_| "(skill)"))
                    .unwrap_or("");
                format!("{}. {id}  {}", i + 1, first_line(what, 72))
            })
            .collect();
        rows.push(("steps", lines.join("\n")));
    }
    let width = rows.iter().map(|(label, _)| label.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (label, value) in rows {
        let indent = " ".repeat(width + 2);
        let value = value.replace('\n', &format!("\n{indent}"));
        let _ = writeln!(out, "{label:<width$}  {value}");
    }
    out
}

/// One line per checkpoint: its id, when, and its patch (an artifact of the job).
pub fn checkpoint_table(checkpoints: &[contract::timeline::Checkpoint]) -> String {
    if checkpoints.is_empty() {
        return "no checkpoints yet: one is saved after each step and each iteration\n".into();
    }
    let width = checkpoints.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in checkpoints {
        let _ = writeln!(
            out,
            "{:<width$}  {}  {}  base {}",
            c.id,
            second(&c.created_at),
            c.saved.artifact,
            c.saved.base_commit.chars().take(12).collect::<String>()
        );
    }
    out
}

/// `12  2026-02-17 10:00:05 UTC  info   task.step.started  step 1`
pub fn event_line(event: &JobEvent) -> String {
    let message = event.message.trim_end().replace('\n', "\n    ");
    let line = format!(
        "{}  {}  {:<5}  {}  {}",
        event.id,
        second(&event.created_at),
        event.level.as_str(),
        event.kind,
        message
    );
    line.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(usage: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "id": "0190a000-0000-7000-8000-000000000009", "type": "task",
            "status": "succeeded", "priority": 0,
            "payload": { "repository": "octo/hello", "task": { "instructions": "Fix it" } },
            "requiredCapabilities": [], "attempt": 1, "maxAttempts": 3,
            "nextAttemptAt": "2026-02-17T10:00:00Z", "createdAt": "2026-02-17T10:00:00Z",
            "updatedAt": "2026-02-17T10:00:00Z", "usage": usage,
        }))
        .expect("a job")
    }

    #[test]
    fn jobs_show_says_what_the_steps_used_and_nothing_when_none_was_reported() {
        let summary = job_summary(&job(serde_json::json!({
            "inputTokens": 1210, "cachedInputTokens": 300, "outputTokens": 51, "costUsd": 0.25,
        })));
        let expected = "usage       1,210 in (300 cached) · 51 out · $0.25";
        assert!(
            summary.lines().any(|l| l == expected),
            "missing `{expected}` in\n{summary}"
        );
        for none in [serde_json::Value::Null, serde_json::json!({})] {
            let summary = job_summary(&job(none));
            assert!(!summary.contains("usage"), "{summary}");
        }
    }
}
