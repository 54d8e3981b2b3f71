use std::collections::HashMap;

use contract::{ConfigError, Defaults, ENV_VARS, PublishMode, RuntimeDefaults, RuntimeMode};

fn from(vars: &[(&str, &str)]) -> Result<Defaults, ConfigError> {
    let env: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Defaults::from_env(|name| env.get(name).cloned())
}

#[test]
fn without_env_the_defaults_are_codex_pr_and_the_cli_defaults() {
    let defaults = from(&[]).unwrap();
    assert_eq!(defaults, Defaults::default());
    assert_eq!(defaults.runtime, RuntimeMode::Codex);
    assert_eq!(defaults.publish_mode, PublishMode::Pr);
    for runtime in RuntimeMode::ALL {
        assert_eq!(defaults.for_runtime(runtime), &RuntimeDefaults::default());
    }
}

#[test]
fn publish_default_comes_from_stepwise_env_then_moonmind_alias() {
    assert_eq!(
        from(&[("STEPWISE_DEFAULT_PUBLISH_MODE", "branch")])
            .unwrap()
            .publish_mode,
        PublishMode::Branch
    );
    assert_eq!(
        from(&[("MOONMIND_DEFAULT_PUBLISH_MODE", "none")])
            .unwrap()
            .publish_mode,
        PublishMode::None
    );
    let both_agree = [
        ("STEPWISE_DEFAULT_PUBLISH_MODE", "branch"),
        ("MOONMIND_DEFAULT_PUBLISH_MODE", " BRANCH "),
    ];
    assert_eq!(from(&both_agree).unwrap().publish_mode, PublishMode::Branch);
    let stepwise_blank = [
        ("STEPWISE_DEFAULT_PUBLISH_MODE", "  "),
        ("MOONMIND_DEFAULT_PUBLISH_MODE", "none"),
    ];
    assert_eq!(
        from(&stepwise_blank).unwrap().publish_mode,
        PublishMode::None
    );
}

#[test]
fn disagreeing_publish_mode_variables_are_an_error_naming_both() {
    let err = from(&[
        ("STEPWISE_DEFAULT_PUBLISH_MODE", "pr"),
        ("MOONMIND_DEFAULT_PUBLISH_MODE", "none"),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "STEPWISE_DEFAULT_PUBLISH_MODE=\"pr\" and MOONMIND_DEFAULT_PUBLISH_MODE=\"none\" disagree; \
         set only one of them, or both to the same value"
    );
}

#[test]
fn invalid_publish_mode_env_is_a_config_error() {
    let err = from(&[("STEPWISE_DEFAULT_PUBLISH_MODE", "merge")]).unwrap_err();
    assert_eq!(
        err,
        ConfigError::Invalid {
            variable: "STEPWISE_DEFAULT_PUBLISH_MODE",
            value: "merge".into(),
            accepted: "none, branch, pr".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "STEPWISE_DEFAULT_PUBLISH_MODE=\"merge\" is not valid; accepted: none, branch, pr"
    );
    let alias = from(&[
        ("STEPWISE_DEFAULT_PUBLISH_MODE", "pr"),
        ("MOONMIND_DEFAULT_PUBLISH_MODE", "prr"),
    ])
    .unwrap_err();
    assert!(
        alias
            .to_string()
            .starts_with("MOONMIND_DEFAULT_PUBLISH_MODE=\"prr\" is not valid"),
        "{alias}"
    );
    let as_dyn: &dyn std::error::Error = &err;
    assert!(as_dyn.source().is_none());
}

#[test]
fn runtime_default_comes_from_env() {
    assert_eq!(
        from(&[("STEPWISE_DEFAULT_RUNTIME", "Claude")])
            .unwrap()
            .runtime,
        RuntimeMode::Claude
    );
    assert_eq!(
        from(&[("STEPWISE_DEFAULT_RUNTIME", "cursor")])
            .unwrap_err()
            .to_string(),
        "STEPWISE_DEFAULT_RUNTIME=\"cursor\" is not valid; accepted: codex, claude, gemini"
    );
}

#[test]
fn per_runtime_model_and_effort_come_from_env() {
    let defaults = from(&[
        ("STEPWISE_CODEX_MODEL", "gpt-5.5"),
        ("STEPWISE_CODEX_EFFORT", "XHigh"),
        ("STEPWISE_CLAUDE_MODEL", " opus "),
        ("STEPWISE_CLAUDE_EFFORT", "max"),
        ("STEPWISE_GEMINI_MODEL", ""),
        ("STEPWISE_GEMINI_EFFORT", "low"),
    ])
    .unwrap();
    assert_eq!(
        defaults.codex,
        RuntimeDefaults {
            model: Some("gpt-5.5".into()),
            effort: Some("xhigh".into())
        }
    );
    assert_eq!(
        defaults.claude,
        RuntimeDefaults {
            model: Some("opus".into()),
            effort: Some("max".into())
        }
    );
    assert_eq!(
        defaults.gemini,
        RuntimeDefaults {
            model: None,
            effort: Some("low".into())
        }
    );
}

#[test]
fn invalid_effort_or_model_env_is_a_config_error() {
    assert_eq!(
        from(&[("STEPWISE_GEMINI_EFFORT", "max")])
            .unwrap_err()
            .to_string(),
        "STEPWISE_GEMINI_EFFORT=\"max\" is not valid; accepted: low, medium, high"
    );
    assert_eq!(
        from(&[("STEPWISE_CLAUDE_MODEL", "claude opus")])
            .unwrap_err()
            .to_string(),
        "STEPWISE_CLAUDE_MODEL=\"claude opus\" is not valid; accepted: a model name without spaces or control \
         characters, at most 200 characters"
    );
}

#[test]
fn env_var_list_names_every_variable_read() {
    let names: Vec<_> = ENV_VARS.iter().map(|v| v.name).collect();
    assert_eq!(
        names,
        [
            "STEPWISE_DEFAULT_PUBLISH_MODE",
            "MOONMIND_DEFAULT_PUBLISH_MODE",
            "STEPWISE_DEFAULT_RUNTIME",
            "STEPWISE_CODEX_MODEL",
            "STEPWISE_CODEX_EFFORT",
            "STEPWISE_CLAUDE_MODEL",
            "STEPWISE_CLAUDE_EFFORT",
            "STEPWISE_GEMINI_MODEL",
            "STEPWISE_GEMINI_EFFORT",
        ]
    );
    // Every listed variable is actually consulted, and nothing else is.
    let asked = std::cell::RefCell::new(Vec::new());
    Defaults::from_env(|name| {
        asked.borrow_mut().push(name.to_string());
        None
    })
    .unwrap();
    let mut asked = asked.into_inner();
    asked.sort();
    let mut listed: Vec<_> = names.iter().map(|n| n.to_string()).collect();
    listed.sort();
    assert_eq!(asked, listed);
}

#[test]
fn defaults_serialize_for_the_ui() {
    let json = serde_json::to_value(Defaults::default()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "runtime": "codex",
            "publishMode": "pr",
            "codex": { "model": null, "effort": null },
            "claude": { "model": null, "effort": null },
            "gemini": { "model": null, "effort": null }
        })
    );
}
