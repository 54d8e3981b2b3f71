//! `stepwise serve`'s task defaults as a deployment sets them: in the environment. Clap
//! reads a variable when the command is built, so these tests set real ones; they live in
//! a binary of their own, and every test here takes one lock, so none sees another's.

mod common;

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use clap::{CommandFactory, FromArgMatches};
use contract::{Defaults, PublishMode, RuntimeDefaults, RuntimeMode};
use stepwise::cli::Cli;
use stepwise::cli::config::ServeArgs;

const VARIABLES: [&str; 11] = [
    "STEPWISE_DEFAULT_PUBLISH_MODE",
    "MOONMIND_DEFAULT_PUBLISH_MODE",
    "STEPWISE_REQUIRE_APPROVAL",
    "STEPWISE_DEFAULT_RUNTIME",
    "STEPWISE_CODEX_MODEL",
    "STEPWISE_CODEX_EFFORT",
    "STEPWISE_CLAUDE_MODEL",
    "STEPWISE_CLAUDE_EFFORT",
    "STEPWISE_GEMINI_MODEL",
    "STEPWISE_GEMINI_EFFORT",
    "STEPWISE_DEFAULT_BUDGET_USD",
];

static ENVIRONMENT: Mutex<()> = Mutex::new(());

/// The environment to ourselves, with none of the task-default variables set (a
/// developer's shell may hold some).
fn environment() -> MutexGuard<'static, ()> {
    let guard = ENVIRONMENT.lock().unwrap_or_else(|e| e.into_inner());
    set(&[]);
    guard
}

/// Exactly `vars` of the task-default variables. Only call it holding [`environment`].
fn set(vars: &[(&str, &str)]) {
    // SAFETY: every test in this binary reads and writes the environment only while it
    // holds ENVIRONMENT, and no other thread of this process reads it meanwhile.
    unsafe {
        for name in VARIABLES {
            std::env::remove_var(name);
        }
        for (name, value) in vars {
            std::env::set_var(name, value);
        }
    }
}

/// What `stepwise serve <flags>` makes of the task defaults with `vars` set; a refusal is
/// the message the operator reads.
fn serve(flags: &[&str], vars: &[(&str, &str)]) -> Result<Defaults, String> {
    let _environment = environment();
    set(vars);
    let matches = Cli::command()
        .try_get_matches_from(["stepwise", "serve"].iter().chain(flags))
        .map_err(|e| e.to_string());
    set(&[]);
    let matches = matches?;
    let (_, serve) = matches.subcommand().expect("the serve command");
    let args = ServeArgs::from_arg_matches(serve).map_err(|e| e.to_string())?;
    args.defaults.resolve().map_err(|e| e.to_string())
}

fn from(vars: &[(&str, &str)]) -> Result<Defaults, String> {
    serve(&[], vars)
}

fn refusal(vars: &[(&str, &str)]) -> String {
    from(vars).expect_err("refused")
}

#[test]
fn without_flags_or_variables_a_task_gets_codex_pr_and_the_cli_defaults() {
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
    let err = refusal(&[
        ("STEPWISE_DEFAULT_PUBLISH_MODE", "pr"),
        ("MOONMIND_DEFAULT_PUBLISH_MODE", "none"),
    ]);
    assert_eq!(
        err,
        "STEPWISE_DEFAULT_PUBLISH_MODE=\"pr\" and MOONMIND_DEFAULT_PUBLISH_MODE=\"none\" disagree; \
         set only one of them, or both to the same value"
    );
}

#[test]
fn invalid_publish_mode_env_is_refused_naming_the_variable_and_the_accepted_values() {
    let err = refusal(&[("STEPWISE_DEFAULT_PUBLISH_MODE", "merge")]);
    assert!(
        err.starts_with("error: invalid value 'merge' for 'STEPWISE_DEFAULT_PUBLISH_MODE'"),
        "{err}"
    );
    assert!(err.contains("[possible values: none, branch, pr]"), "{err}");
    let alias = refusal(&[
        ("STEPWISE_DEFAULT_PUBLISH_MODE", "pr"),
        ("MOONMIND_DEFAULT_PUBLISH_MODE", "prr"),
    ]);
    assert!(
        alias.starts_with("error: invalid value 'prr' for 'MOONMIND_DEFAULT_PUBLISH_MODE'"),
        "{alias}"
    );
}

#[test]
fn runtime_default_comes_from_env() {
    assert_eq!(
        from(&[("STEPWISE_DEFAULT_RUNTIME", "Claude")])
            .unwrap()
            .runtime,
        RuntimeMode::Claude
    );
    let err = refusal(&[("STEPWISE_DEFAULT_RUNTIME", "cursor")]);
    assert!(
        err.starts_with("error: invalid value 'cursor' for 'STEPWISE_DEFAULT_RUNTIME'"),
        "{err}"
    );
    assert!(
        err.contains("[possible values: codex, claude, gemini]"),
        "{err}"
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
fn invalid_effort_or_model_env_is_refused_naming_the_variable() {
    let err = refusal(&[("STEPWISE_GEMINI_EFFORT", "max")]);
    assert!(
        err.starts_with("error: invalid value 'max' for 'STEPWISE_GEMINI_EFFORT'"),
        "{err}"
    );
    assert!(
        err.contains("[possible values: low, medium, high]"),
        "{err}"
    );
    // Effort levels are each runtime's own: what gemini refuses, claude takes.
    let claude = from(&[("STEPWISE_CLAUDE_EFFORT", "max")]).unwrap();
    assert_eq!(claude.claude.effort.as_deref(), Some("max"));
    let err = refusal(&[("STEPWISE_CLAUDE_MODEL", "claude opus")]);
    assert!(
        err.starts_with(
            "error: invalid value 'claude opus' for 'STEPWISE_CLAUDE_MODEL': a model name \
             cannot contain spaces or control characters"
        ),
        "{err}"
    );
}

/// Clap hands an empty variable to the parser as a value; an env file's `NAME=` has
/// always meant unset here.
#[test]
fn blank_variables_count_as_unset() {
    let empty: Vec<_> = VARIABLES.iter().map(|name| (*name, "")).collect();
    assert_eq!(from(&empty).unwrap(), Defaults::default());
    let spaces: Vec<_> = VARIABLES.iter().map(|name| (*name, " \t ")).collect();
    assert_eq!(from(&spaces).unwrap(), Defaults::default());
}

#[test]
fn a_flag_wins_over_its_variable_and_a_refusal_names_the_flag() {
    let defaults = serve(
        &["--codex-effort", "high", "--default-runtime", "gemini"],
        &[
            ("STEPWISE_CODEX_EFFORT", "low"),
            ("STEPWISE_DEFAULT_RUNTIME", "claude"),
        ],
    )
    .unwrap();
    assert_eq!(defaults.codex.effort.as_deref(), Some("high"));
    assert_eq!(defaults.runtime, RuntimeMode::Gemini);
    let err = serve(&["--gemini-effort", "max"], &[]).unwrap_err();
    assert!(
        err.starts_with("error: invalid value 'max' for '--gemini-effort'"),
        "{err}"
    );
}

#[test]
fn a_default_price_limit_is_a_positive_number_of_dollars() {
    let defaults = from(&[("STEPWISE_DEFAULT_BUDGET_USD", " 2.5 ")]).unwrap();
    assert_eq!(defaults.budget_usd, Some(2.5));
    let flag = serve(&["--default-budget-usd", "7"], &[]).unwrap();
    assert_eq!(flag.budget_usd, Some(7.0));
    for bad in ["0", "-1", "lots"] {
        let err = refusal(&[("STEPWISE_DEFAULT_BUDGET_USD", bad)]);
        assert!(err.contains("STEPWISE_DEFAULT_BUDGET_USD"), "{bad}: {err}");
    }
}

#[test]
fn serve_reads_exactly_the_task_default_variables() {
    let _environment = environment();
    let command = Cli::command();
    let serve = command.find_subcommand("serve").expect("the serve command");
    let read: Vec<_> = serve
        .get_arguments()
        .filter(|arg| arg.get_help_heading() == Some("Task defaults"))
        .filter_map(|arg| arg.get_env()?.to_str())
        .collect();
    assert_eq!(read, VARIABLES);
}

#[test]
fn serve_help_documents_every_task_default_and_its_accepted_values() {
    let _environment = environment();
    let mut command = Cli::command();
    let help = command
        .find_subcommand_mut("serve")
        .expect("the serve command")
        .render_long_help()
        .to_string();
    for name in VARIABLES {
        assert!(help.contains(name), "{name} missing from:\n{help}");
    }
    for flag in [
        "--default-publish-mode <MODE>",
        "--default-runtime <RUNTIME>",
        "--codex-model <MODEL>",
        "--claude-effort <EFFORT>",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(!help.contains("--moonmind-default-publish-mode"), "{help}");
    for values in [
        "[possible values: none, branch, pr]",
        "[possible values: codex, claude, gemini]",
        "[possible values: low, medium, high, xhigh, max, ultra]",
        "[possible values: low, medium, high]",
    ] {
        assert!(help.contains(values), "{values} missing from:\n{help}");
    }
}

#[test]
fn an_invalid_variable_stops_stepwise_serve_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut command = Command::new(common::BIN);
    command
        .args(["serve", "--no-worker", "--port", "0", "--data-dir"])
        .arg(&data)
        .arg("--site-root")
        .arg(dir.path());
    for name in VARIABLES {
        command.env_remove(name);
    }
    let out = {
        let _environment = environment();
        command
            .env("STEPWISE_DEFAULT_PUBLISH_MODE", "sometimes")
            .output()
            .unwrap()
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid value 'sometimes' for 'STEPWISE_DEFAULT_PUBLISH_MODE'"),
        "{stderr}"
    );
    assert!(!data.exists(), "the database was opened");
}
