//! The runtime-neutral step prompt (seed 001 §6.1). The text is a contract with the
//! agents and with anyone diffing prompts across versions: change it only deliberately,
//! and keep the byte-for-byte tests in step.

use crate::model::NormalizedTask;
use crate::steps::ResolvedStep;
use crate::wire::AUTO_SKILL;

pub const NO_STEP_INSTRUCTIONS: &str =
    "(no step-specific instructions; continue based on objective)";

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
        step.instructions.clone().unwrap_or_else(|| NO_STEP_INSTRUCTIONS.to_string()),
        String::new(),
        "EFFECTIVE SKILL:".to_string(),
        step.effective_skill.clone(),
        String::new(),
        "WORKSPACE:".to_string(),
        "- Repo is checked out and on the effective working branch already.".to_string(),
        "- Do NOT commit or push. Publish is handled by MoonMind publish stage.".to_string(),
        "- Skills are available under: .agents/skills/ and .gemini/skills/ (symlinks to job skills workspace)."
            .to_string(),
        "- Write logs to stdout/stderr; MoonMind captures them.".to_string(),
    ];
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
