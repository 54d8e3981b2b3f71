use contract::ResolvedStep;
use serde_json::{Map, json};

use crate::common::{ok, task_with};

fn effective(steps: &[ResolvedStep]) -> Vec<&str> {
    steps.iter().map(|s| s.effective_skill.as_str()).collect()
}

#[test]
fn effective_skill_prefers_step_then_task_then_auto() {
    let mut raw = task_with(
        "skill",
        json!({ "id": "repo-task", "args": { "from": "task" } }),
    );
    raw["payload"]["task"]["steps"] = json!([
        { "instructions": "inherits the task skill" },
        { "skill": { "id": "speckit", "args": { "from": "step" } } },
        { "instructions": "explicitly auto", "skill": { "id": "auto" } }
    ]);
    let steps = ok(&raw).resolved_steps();
    assert_eq!(effective(&steps), ["repo-task", "speckit", "auto"]);
    assert_eq!(
        serde_json::Value::Object(steps[0].skill_args.clone()),
        json!({ "from": "task" })
    );
    assert_eq!(
        serde_json::Value::Object(steps[1].skill_args.clone()),
        json!({ "from": "step" })
    );
    assert_eq!(steps[2].skill_args, Map::new());

    let no_task_skill = task_with("steps", json!([{ "instructions": "a" }]));
    assert_eq!(effective(&ok(&no_task_skill).resolved_steps()), ["auto"]);
}

#[test]
fn empty_steps_resolve_to_one_implicit_step() {
    let raw = task_with("skill", json!({ "id": "speckit", "args": { "k": 1 } }));
    let steps = ok(&raw).resolved_steps();
    assert_eq!(
        steps,
        [ResolvedStep {
            index: 0,
            id: "step-1".into(),
            title: None,
            instructions: None,
            effective_skill: "speckit".into(),
            has_step_instructions: false,
            skill_args: json!({ "k": 1 }).as_object().unwrap().clone(),
            round: 1,
        }]
    );
    assert_eq!(
        ok(&task_with("steps", json!([]))).resolved_steps()[0].effective_skill,
        "auto"
    );
}

#[test]
fn skills_are_the_union_of_non_auto_skills_in_first_appearance_order() {
    let mut raw = task_with("skill", json!({ "id": "base" }));
    raw["payload"]["task"]["steps"] = json!([
        { "skill": { "id": "speckit" } },
        { "instructions": "x", "skill": { "id": "auto" } },
        { "skill": { "id": "base" } },
        { "skill": { "id": "lint" } },
        { "skill": { "id": "speckit" } }
    ]);
    assert_eq!(ok(&raw).skills(), ["base", "speckit", "lint"]);
    assert_eq!(ok(&crate::common::minimal()).skills(), Vec::<String>::new());
}

#[test]
fn a_resolved_step_is_named_in_its_events_by_the_seed_keys() {
    use contract::events::{StepStarted, TaskEvent};
    let step = ok(&crate::common::seed()).resolved_steps().remove(1);
    assert_eq!(
        serde_json::Value::Object(
            StepStarted {
                step: (&step).into()
            }
            .payload()
        ),
        json!({
            "stepIndex": 1,
            "stepId": "step-2",
            "effectiveSkill": "speckit",
            "hasStepInstructions": false
        })
    );
}
