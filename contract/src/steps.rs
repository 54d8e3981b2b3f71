//! Step resolution: the concrete list of agent invocations a task makes.

use serde_json::{Map, Value};

use crate::model::{NormalizedTask, TaskSpec};
use crate::wire::SkillSelection;

/// One step as the worker runs it. Its events name it by a
/// [`StepRef`](crate::events::StepRef) made from it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedStep {
    /// 0-based position in the task.
    pub index: usize,
    pub id: String,
    pub title: Option<String>,
    pub instructions: Option<String>,
    pub effective_skill: String,
    pub has_step_instructions: bool,
    /// Arguments of whichever skill selection won (the step's own, else the task's).
    pub skill_args: Map<String, Value>,
    /// The round that added it: 1 for the task's own steps, 2 and on for follow-ups.
    pub round: u32,
}

impl NormalizedTask {
    /// The steps the worker runs, in order; never empty.
    pub fn resolved_steps(&self) -> Vec<ResolvedStep> {
        resolve_steps(&self.payload.task)
    }
}

/// The generated id of the step at `index`; also used when a client omits an id.
pub fn generated_step_id(index: usize) -> String {
    format!("step-{}", index + 1)
}

/// An empty step list is the implicit single step (FR-003): objective only, task skill.
pub fn resolve_steps(task: &TaskSpec) -> Vec<ResolvedStep> {
    if task.steps.is_empty() {
        return vec![resolved(
            0,
            generated_step_id(0),
            None,
            None,
            &task.skill,
            1,
        )];
    }
    task.steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            // Precedence step.skill -> task.skill (which is `auto` when the client gave none).
            let skill = step.skill.as_ref().unwrap_or(&task.skill);
            resolved(
                index,
                step.id.clone(),
                step.title.clone(),
                step.instructions.clone(),
                skill,
                task.round_of(index),
            )
        })
        .collect()
}

fn resolved(
    index: usize,
    id: String,
    title: Option<String>,
    instructions: Option<String>,
    skill: &SkillSelection,
    round: u32,
) -> ResolvedStep {
    ResolvedStep {
        round,
        index,
        id,
        title,
        has_step_instructions: instructions.is_some(),
        instructions,
        effective_skill: skill.id.clone(),
        skill_args: skill.args.clone(),
    }
}
