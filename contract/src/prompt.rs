//! The runtime-neutral step prompt (seed 001 §6.1). The text is a contract with the
//! agents and with anyone diffing prompts across versions: change it only deliberately,
//! and keep the byte-for-byte tests in step.

use crate::model::{Completion, NormalizedTask};
use crate::steps::ResolvedStep;
use crate::wire::AUTO_SKILL;

pub const NO_STEP_INSTRUCTIONS: &str =
    "(no step-specific instructions; continue based on objective)";

const WORKSPACE: [&str; 5] = [
    "WORKSPACE:",
    "- Repo is checked out and on the effective working branch already.",
    "- Do NOT commit or push. Publish is handled by MoonMind publish stage.",
    "- Skills are available under: .agents/skills/ and .gemini/skills/ (symlinks to job skills workspace).",
    "- Write logs to stdout/stderr; MoonMind captures them.",
];

/// The prompt for `step`, the `total`-step run's step number `step.index + 1`.
/// Lines are joined with `\n`; there is no trailing newline.
pub fn prompt(task: &NormalizedTask, step: &ResolvedStep, total: usize) -> String {
    let mut header = format!("STEP {}/{} {}", step.index + 1, total, step.id);
    if let Some(title) = &step.title {
        header.push(' ');
        header.push_str(title);
    }
    header.push(':');

    let mut lines = vec![
        "MOONMIND TASK OBJECTIVE:".to_string(),
        task.payload.task.instructions.clone(),
        String::new(),
        header,
        step.instructions
            .clone()
            .unwrap_or_else(|| NO_STEP_INSTRUCTIONS.to_string()),
        String::new(),
        "EFFECTIVE SKILL:".to_string(),
        step.effective_skill.clone(),
        String::new(),
    ];
    lines.extend(WORKSPACE.iter().map(|l| l.to_string()));
    if step.effective_skill != AUTO_SKILL {
        lines.push(String::new());
        lines.push("SKILL USAGE:".to_string());
        lines.push(format!(
            "Use the selected skill's files under .agents/skills/{}/ as the procedure for this step.",
            step.effective_skill
        ));
    }
    lines.join("\n")
}

/// The most characters of an earlier step's instructions that [`with_history`] repeats.
const HISTORY_STEP_CHARS: usize = 400;

/// `prompt` for a run that had to begin a new agent session where it meant to continue the
/// job's (`loss` says why): first what the job did before, the steps that ran before it
/// (`earlier`, of a `total`-step task) and its latest commits (`commits`, one a line, as
/// the worker read and redacted them), so the new session does not start blind.
pub fn with_history(
    earlier: &[ResolvedStep],
    total: usize,
    loss: crate::session::SessionLoss,
    commits: &str,
    prompt: &str,
) -> String {
    let mut lines = vec![
        "JOB SO FAR:".to_string(),
        format!(
            "This job's agent session cannot be continued ({}), so this is a new one. \
             The job ran these steps before; their work is in the repository as it is now.",
            loss.reason()
        ),
    ];
    for step in earlier {
        let mut line = format!("- STEP {}/{} {}", step.index + 1, total, step.id);
        if let Some(title) = &step.title {
            line.push(' ');
            line.push_str(title);
        }
        if step.round > 1 {
            line.push_str(&format!(" (round {})", step.round));
        }
        if let Some(text) = &step.instructions {
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut cut: String = flat.chars().take(HISTORY_STEP_CHARS).collect();
            if cut.len() < flat.len() {
                cut.push('…');
            }
            line.push_str(": ");
            line.push_str(&cut);
        }
        lines.push(line);
    }
    if earlier.is_empty() {
        lines.push("- (no step of it ran before this one)".to_string());
    }
    lines.push("Latest commits on the working branch:".to_string());
    let commits = commits.trim();
    lines.push(
        if commits.is_empty() {
            "(none)"
        } else {
            commits
        }
        .to_string(),
    );
    lines.push(String::new());
    lines.push(prompt.to_string());
    lines.join("\n")
}

/// The prompt of iteration `n` of the completion loop (seed 003): the objective, what
/// "done" means, the check, and the end of its last output (`check_tail`, which the worker
/// has redacted). Lines are joined with `\n`; there is no trailing newline.
pub fn iteration_prompt(
    task: &NormalizedTask,
    completion: &Completion,
    n: u32,
    check_tail: &str,
) -> String {
    let mut lines = vec![
        "MOONMIND TASK OBJECTIVE:".to_string(),
        task.payload.task.instructions.clone(),
        String::new(),
        format!("COMPLETION ITERATION {n}/{}:", completion.max_iterations),
        "The task's steps have run, but its completion check does not pass yet. Change the \
         repository so that it passes; do not change the check."
            .to_string(),
    ];
    if let Some(criteria) = &completion.criteria {
        lines.push(format!("Completion criteria: {criteria}"));
    }
    if let Some(command) = &completion.command {
        lines.push(format!("Check command (run in the repository): {command}"));
    }
    if let Some(pattern) = &completion.output_pattern {
        lines.push(format!("Its output must also match: {pattern}"));
    }
    lines.push(String::new());
    lines.push("LAST CHECK OUTPUT (the end of it):".to_string());
    lines.push(check_tail.to_string());
    lines.push(String::new());
    lines.extend(WORKSPACE.iter().map(|l| l.to_string()));
    lines.join("\n")
}
