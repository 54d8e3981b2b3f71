use contract::{FieldError, derive_capabilities};
use serde_json::json;

use crate::common::{errors, minimal, ok, seed, task_with, with};

fn caps(raw: &serde_json::Value) -> Vec<String> {
    ok(raw).payload.required_capabilities
}

#[test]
fn gh_is_required_only_when_publishing_a_pr() {
    let publish = |mode: &str| task_with("publish", json!({ "mode": mode }));
    assert_eq!(caps(&publish("pr")), ["codex", "git", "gh"]);
    assert_eq!(caps(&publish("branch")), ["codex", "git"]);
    assert_eq!(caps(&publish("none")), ["codex", "git"]);
    // No publish section: the default mode (pr) applies, and with it gh.
    assert_eq!(caps(&minimal()), ["codex", "git", "gh"]);
}

#[test]
fn docker_is_required_when_the_container_is_enabled() {
    let raw = task_with("container", json!({ "enabled": true, "image": "alpine" }));
    assert_eq!(caps(&raw), ["codex", "git", "gh", "docker"]);
    let off = task_with("container", json!({ "enabled": false, "image": "alpine" }));
    assert_eq!(caps(&off), ["codex", "git", "gh"]);
}

#[test]
fn runtime_capability_follows_the_runtime() {
    assert_eq!(
        caps(&with(minimal(), "/payload/targetRuntime", json!("claude")))[0],
        "claude"
    );
    assert_eq!(
        caps(&task_with("runtime", json!({ "mode": "gemini" })))[0],
        "gemini"
    );
}

#[test]
fn capabilities_are_lowercased_deduplicated_in_stable_order() {
    let mut raw = task_with("publish", json!({ "mode": "branch" }));
    raw["payload"]["requiredCapabilities"] = json!([" GPU ", "git", "node"]);
    raw["payload"]["task"]["skill"] =
        json!({ "id": "speckit", "requiredCapabilities": ["Python", "gpu"] });
    raw["payload"]["task"]["steps"] = json!([
        { "instructions": "a", "skill": { "id": "lint", "requiredCapabilities": ["rust", "NODE"] } },
        { "instructions": "b" },
        { "instructions": "c", "skill": { "id": "deploy", "requiredCapabilities": ["kubectl", "CODEX"] } }
    ]);
    assert_eq!(
        caps(&raw),
        ["codex", "git", "gpu", "node", "python", "rust", "kubectl"]
    );
}

#[test]
fn invalid_capabilities_are_reported_at_their_path() {
    let raw = with(
        minimal(),
        "/payload/requiredCapabilities",
        json!(["ok", "", "has space"]),
    );
    assert_eq!(
        errors(&raw),
        [
            FieldError::new("requiredCapabilities[1]", "a capability cannot be blank"),
            FieldError::new(
                "requiredCapabilities[2]",
                "a capability is lowercase letters, digits, `.`, `_`, `:` and `-`, starts with a letter or digit, \
                 and has at most 64 characters"
            ),
        ]
    );
}

#[test]
fn renormalizing_keeps_the_same_capability_list() {
    let mut raw = seed();
    raw["payload"]["requiredCapabilities"] = json!(["Docker-Compose"]);
    let first = ok(&raw);
    assert_eq!(
        first.payload.required_capabilities,
        ["codex", "git", "docker-compose"]
    );
    let again = ok(&serde_json::to_value(&first).unwrap());
    assert_eq!(
        again.payload.required_capabilities,
        first.payload.required_capabilities
    );
}

#[test]
fn derive_capabilities_reports_invalid_items_of_a_hand_built_payload() {
    let mut payload = ok(&minimal()).payload;
    payload.task.skill.required_capabilities = vec!["Bad Cap".into()];
    let errors = derive_capabilities(&payload).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "task.skill.requiredCapabilities[0]");
}
