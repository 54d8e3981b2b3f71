use contract::prompt;
use serde_json::json;

use crate::common::{ok, seed, task_with};

#[test]
fn prompt_for_a_step_with_a_title() {
    let task = ok(&seed());
    let steps = task.resolved_steps();
    let expected = r#"MOONMIND TASK OBJECTIVE:
Implement TaskStepsSystem and update tests.

STEP 1/3 step-1 Inspect current task/worker architecture:
Review current TaskArchitecture and identify integration points.

EFFECTIVE SKILL:
auto

WORKSPACE:
- Repo is checked out and on the effective working branch already.
- Do NOT commit or push. Publish is handled by MoonMind publish stage.
- Skills are available under: .agents/skills/ and .gemini/skills/ (symlinks to job skills workspace).
- Write logs to stdout/stderr; MoonMind captures them."#;
    assert_eq!(prompt(&task, &steps[0], steps.len()), expected);
}

#[test]
fn prompt_for_a_step_without_a_title() {
    let raw = task_with(
        "steps",
        json!([{ "id": "lint", "instructions": "Run clippy." }, { "instructions": "Fix warnings." }]),
    );
    let task = ok(&raw);
    let steps = task.resolved_steps();
    let expected = r#"MOONMIND TASK OBJECTIVE:
Fix the flaky test.

STEP 2/2 step-2:
Fix warnings.

EFFECTIVE SKILL:
auto

WORKSPACE:
- Repo is checked out and on the effective working branch already.
- Do NOT commit or push. Publish is handled by MoonMind publish stage.
- Skills are available under: .agents/skills/ and .gemini/skills/ (symlinks to job skills workspace).
- Write logs to stdout/stderr; MoonMind captures them."#;
    assert_eq!(prompt(&task, &steps[1], steps.len()), expected);
}

#[test]
fn prompt_for_a_step_without_instructions_and_with_a_skill() {
    let task = ok(&seed());
    let steps = task.resolved_steps();
    let expected = r#"MOONMIND TASK OBJECTIVE:
Implement TaskStepsSystem and update tests.

STEP 2/3 step-2 Generate spec using Speckit:
(no step-specific instructions; continue based on objective)

EFFECTIVE SKILL:
speckit

WORKSPACE:
- Repo is checked out and on the effective working branch already.
- Do NOT commit or push. Publish is handled by MoonMind publish stage.
- Skills are available under: .agents/skills/ and .gemini/skills/ (symlinks to job skills workspace).
- Write logs to stdout/stderr; MoonMind captures them.

SKILL USAGE:
Use the selected skill's files under .agents/skills/speckit/ as the procedure for this step."#;
    assert_eq!(prompt(&task, &steps[1], steps.len()), expected);
}

#[test]
fn prompt_for_the_implicit_step_with_auto_skill() {
    let task = ok(&crate::common::minimal());
    let steps = task.resolved_steps();
    let expected = r#"MOONMIND TASK OBJECTIVE:
Fix the flaky test.

STEP 1/1 step-1:
(no step-specific instructions; continue based on objective)

EFFECTIVE SKILL:
auto

WORKSPACE:
- Repo is checked out and on the effective working branch already.
- Do NOT commit or push. Publish is handled by MoonMind publish stage.
- Skills are available under: .agents/skills/ and .gemini/skills/ (symlinks to job skills workspace).
- Write logs to stdout/stderr; MoonMind captures them."#;
    assert_eq!(prompt(&task, &steps[0], steps.len()), expected);
}

#[test]
fn a_new_session_in_place_of_a_lost_one_is_told_the_steps_before_and_the_commits() {
    let task = ok(&seed());
    let steps = task.resolved_steps();
    let step = prompt(&task, &steps[2], steps.len());
    let told = contract::prompt::with_history(
        &steps[..2],
        steps.len(),
        contract::session::SessionLoss::Lost,
        "abc1234 Add the steps table\n",
        &step,
    );
    let expected_head = "JOB SO FAR:
This job's agent session cannot be continued (its session was not kept), so this is a new one. The job ran these steps before; their work is in the repository as it is now.
- STEP 1/3 step-1 Inspect current task/worker architecture: Review current TaskArchitecture and identify integration points.
";
    assert!(told.starts_with(expected_head), "{told}");
    assert!(
        told.contains("Latest commits on the working branch:\nabc1234 Add the steps table\n\nMOONMIND TASK OBJECTIVE:"),
        "{told}"
    );
    assert!(told.ends_with(&step), "the step's own prompt follows whole");
    let first = contract::prompt::with_history(
        &[],
        3,
        contract::session::SessionLoss::RuntimeChanged,
        "",
        "P",
    );
    assert!(first.contains("- (no step of it ran before this one)\nLatest commits on the working branch:\n(none)\n\nP"), "{first}");
}
