use contract::{PublishMode, RuntimeMode};
use serde_json::json;

use crate::common::{ok, seed};

#[test]
fn seed_example_payload_is_accepted_with_derived_capabilities() {
    let task = ok(&seed());
    let payload = &task.payload;
    // publish mode is `branch`, so no `gh`; no container, no skill capabilities.
    assert_eq!(payload.required_capabilities, ["codex", "git"]);
    assert_eq!(payload.repository, "MoonLadderStudios/MoonMind");
    assert_eq!(payload.target_runtime, RuntimeMode::Codex);
    assert_eq!(payload.task.runtime.model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(payload.task.runtime.effort.as_deref(), Some("high"));
    assert_eq!(payload.task.publish.mode, PublishMode::Branch);
    assert_eq!(task.priority, 0);
    assert_eq!(task.max_attempts, 3);
}

#[test]
fn seed_example_steps_resolve_with_their_effective_skills() {
    let task = ok(&seed());
    let steps = task.resolved_steps();
    let summary: Vec<_> = steps
        .iter()
        .map(|s| {
            (
                s.index,
                s.id.as_str(),
                s.effective_skill.as_str(),
                s.has_step_instructions,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (0, "step-1", "auto", true),
            (1, "step-2", "speckit", false),
            (2, "step-3", "auto", true)
        ]
    );
    assert_eq!(
        steps[1].title.as_deref(),
        Some("Generate spec using Speckit")
    );
    assert_eq!(steps[1].instructions, None);
    assert_eq!(task.skills(), ["speckit"]);
}

#[test]
fn normalized_seed_example_is_the_canonical_envelope() {
    let task = ok(&seed());
    let step = |id: &str, title: &str, instructions: Option<&str>, skill: &str| {
        json!({
            "id": id, "title": title, "instructions": instructions,
            "skill": { "id": skill, "args": {}, "requiredCapabilities": [] }
        })
    };
    let expected = json!({
        "type": "task",
        "priority": 0,
        "maxAttempts": 3,
        "affinityKey": null,
        "payload": {
            "repository": "MoonLadderStudios/MoonMind",
            "targetRuntime": "codex",
            "requiredCapabilities": ["codex", "git"],
            "auth": { "repoAuthRef": null, "publishAuthRef": null },
            "task": {
                "instructions": "Implement TaskStepsSystem and update tests.",
                "skill": { "id": "auto", "args": {}, "requiredCapabilities": [] },
                "runtime": { "mode": "codex", "model": "gpt-5-codex", "effort": "high" },
                "git": { "startingBranch": null, "newBranch": null },
                "publish": { "mode": "branch", "prBaseBranch": null, "commitMessage": null, "prTitle": null, "prBody": null },
                "steps": [
                    step("step-1", "Inspect current task/worker architecture",
                         Some("Review current TaskArchitecture and identify integration points."), "auto"),
                    step("step-2", "Generate spec using Speckit", None, "speckit"),
                    step("step-3", "Implement code + tests",
                         Some("Implement the code changes and update unit tests."), "auto"),
                ],
                "container": { "enabled": false, "image": null, "command": null }
            }
        }
    });
    assert_eq!(serde_json::to_value(&task).unwrap(), expected);
}

#[test]
fn normalizing_the_normalized_seed_example_changes_nothing() {
    let task = ok(&seed());
    let again = ok(&serde_json::to_value(&task).unwrap());
    assert_eq!(again, task);
}
