use contract::{Defaults, PublishMode, RuntimeDefaults, RuntimeMode};

#[test]
fn unconfigured_defaults_are_codex_pr_and_the_cli_defaults() {
    let defaults = Defaults::default();
    assert_eq!(defaults.runtime, RuntimeMode::Codex);
    assert_eq!(defaults.publish_mode, PublishMode::Pr);
    for runtime in RuntimeMode::ALL {
        assert_eq!(defaults.for_runtime(runtime), &RuntimeDefaults::default());
    }
}

#[test]
fn each_runtime_has_its_own_model_and_effort() {
    let defaults = Defaults {
        claude: RuntimeDefaults {
            model: Some("opus".into()),
            effort: Some("max".into()),
        },
        ..Defaults::default()
    };
    assert_eq!(
        defaults.for_runtime(RuntimeMode::Claude).model.as_deref(),
        Some("opus")
    );
    assert_eq!(
        defaults.for_runtime(RuntimeMode::Codex),
        &RuntimeDefaults::default()
    );
    assert_eq!(
        defaults.for_runtime(RuntimeMode::Gemini),
        &RuntimeDefaults::default()
    );
}

#[test]
fn defaults_serialize_for_the_ui() {
    let json = serde_json::to_value(Defaults::default()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "runtime": "codex",
            "publishMode": "pr",
            "approvalRequired": false,
            "codex": { "model": null, "effort": null },
            "claude": { "model": null, "effort": null },
            "gemini": { "model": null, "effort": null }
        })
    );
}
