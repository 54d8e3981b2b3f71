use contract::{Defaults, PublishMode, RuntimeDefaults, RuntimeMode};
use serde_json::{Value, json};

use crate::common::{error, errors, minimal, ok, ok_with, paths, task_with, with};

fn repo(value: Value) -> Value {
    with(minimal(), "/payload/repository", value)
}

#[test]
fn repository_is_required() {
    let raw = json!({ "payload": { "task": { "instructions": "x" } } });
    assert_eq!(
        error(&raw),
        "repository: required: the git repository to work on, e.g. owner/name or https://host/owner/name.git"
    );
    assert!(error(&repo(json!("  "))).starts_with("repository: required"));
}

#[test]
fn accepted_repository_forms_are_kept_trimmed() {
    for form in [
        "owner/name",
        "https://github.com/o/r.git",
        "http://git.local/o/r",
        "ssh://git@github.com/o/r.git",
        "git@github.com:o/r.git",
        "file:///srv/git/r",
        "/srv/git/r",
    ] {
        assert_eq!(
            ok(&repo(json!(format!(" {form} ")))).payload.repository,
            form
        );
    }
}

#[test]
fn repository_with_whitespace_or_unknown_form_is_rejected() {
    assert_eq!(
        error(&repo(json!("owner/my repo"))),
        "repository: must not contain spaces or control characters"
    );
    assert_eq!(
        error(&repo(json!("just-a-name"))),
        "repository: expected a GitHub `owner/name`, an https://, http://, ssh:// or file:// URL, \
         a git@host:path address, or an absolute path"
    );
}

#[test]
fn repo_alias_is_accepted_and_written_as_repository() {
    let raw = json!({ "payload": { "repo": "octo/repo", "task": { "instructions": "x" } } });
    let task = ok(&raw);
    assert_eq!(task.payload.repository, "octo/repo");
    let out = serde_json::to_value(&task).unwrap();
    assert_eq!(out["payload"]["repository"], "octo/repo");
    assert!(out["payload"].get("repo").is_none());
}

#[test]
fn repo_and_repository_must_agree() {
    assert_eq!(
        ok(&with(minimal(), "/payload/repo", json!("octo/repo")))
            .payload
            .repository,
        "octo/repo"
    );
    assert_eq!(
        error(&with(minimal(), "/payload/repo", json!("octo/other"))),
        "repo: differs from repository; `repo` is an old name of `repository`, give only one"
    );
}

#[test]
fn runtime_comes_from_either_field_or_the_default() {
    let by_target = ok(&with(minimal(), "/payload/targetRuntime", json!("claude")));
    assert_eq!(by_target.payload.task.runtime.mode, RuntimeMode::Claude);
    assert_eq!(by_target.payload.target_runtime, RuntimeMode::Claude);

    let by_mode = ok(&task_with("runtime", json!({ "mode": "Gemini" })));
    assert_eq!(by_mode.payload.target_runtime, RuntimeMode::Gemini);
    assert_eq!(by_mode.payload.task.runtime.mode, RuntimeMode::Gemini);

    let defaults = Defaults {
        runtime: RuntimeMode::Claude,
        ..Defaults::default()
    };
    assert_eq!(
        ok_with(&minimal(), &defaults).payload.target_runtime,
        RuntimeMode::Claude
    );
}

#[test]
fn target_runtime_and_runtime_mode_must_agree() {
    let raw = with(
        task_with("runtime", json!({ "mode": "claude" })),
        "/payload/targetRuntime",
        json!("codex"),
    );
    assert_eq!(
        error(&raw),
        "task.runtime.mode: disagrees with targetRuntime `codex`; they must name the same runtime, \
         or give only one of them"
    );
    assert_eq!(
        error(&with(minimal(), "/payload/targetRuntime", json!("cursor"))),
        "targetRuntime: unknown runtime `cursor`; use one of: codex, claude, gemini"
    );
}

#[test]
fn model_and_effort_fall_back_to_the_runtime_defaults() {
    let defaults = Defaults {
        claude: RuntimeDefaults {
            model: Some("opus".into()),
            effort: Some("max".into()),
        },
        codex: RuntimeDefaults {
            model: Some("gpt-5.5".into()),
            effort: None,
        },
        ..Defaults::default()
    };
    let claude = ok_with(
        &task_with("runtime", json!({ "mode": "claude" })),
        &defaults,
    );
    assert_eq!(claude.payload.task.runtime.model.as_deref(), Some("opus"));
    assert_eq!(claude.payload.task.runtime.effort.as_deref(), Some("max"));

    let codex = ok_with(
        &task_with("runtime", json!({ "model": "o3", "effort": "" })),
        &defaults,
    );
    assert_eq!(codex.payload.task.runtime.model.as_deref(), Some("o3"));
    assert_eq!(codex.payload.task.runtime.effort, None);

    let gemini = ok_with(
        &with(minimal(), "/payload/targetRuntime", json!("gemini")),
        &defaults,
    );
    assert_eq!(
        (
            gemini.payload.task.runtime.model,
            gemini.payload.task.runtime.effort
        ),
        (None, None)
    );
}

#[test]
fn effort_is_lowercased_and_validated_per_runtime() {
    let effort =
        |mode: &str, effort: &str| task_with("runtime", json!({ "mode": mode, "effort": effort }));
    assert_eq!(
        ok(&effort("codex", " HIGH "))
            .payload
            .task
            .runtime
            .effort
            .as_deref(),
        Some("high")
    );
    assert_eq!(
        ok(&effort("codex", "ultra"))
            .payload
            .task
            .runtime
            .effort
            .as_deref(),
        Some("ultra")
    );
    assert_eq!(
        ok(&effort("claude", "max"))
            .payload
            .task
            .runtime
            .effort
            .as_deref(),
        Some("max")
    );
    assert_eq!(
        error(&effort("codex", "minimal")),
        "task.runtime.effort: codex does not accept this effort; use one of: low, medium, high, xhigh, max, ultra"
    );
    assert_eq!(
        error(&effort("gemini", "xhigh")),
        "task.runtime.effort: gemini does not accept this effort; use one of: low, medium, high"
    );
    assert_eq!(
        error(&effort("claude", "minimal")),
        "task.runtime.effort: claude does not accept this effort; use one of: low, medium, high, xhigh, max"
    );
}

#[test]
fn model_without_whitespace_and_at_most_200_characters() {
    assert_eq!(
        error(&task_with("runtime", json!({ "model": "gpt 5" }))),
        "task.runtime.model: a model name cannot contain spaces or control characters"
    );
    assert_eq!(
        error(&task_with("runtime", json!({ "model": "m".repeat(201) }))),
        "task.runtime.model: at most 200 characters"
    );
}

#[test]
fn objective_is_required_trimmed_and_bounded() {
    assert_eq!(
        ok(&task_with("instructions", json!("  Do it.\n")))
            .payload
            .task
            .instructions,
        "Do it."
    );
    let required = "task.instructions: required: describe the task objective; it is included in every step's prompt";
    assert_eq!(error(&task_with("instructions", json!(" \n "))), required);
    assert_eq!(error(&task_with("instructions", json!(null))), required);
    assert_eq!(
        error(&task_with("instructions", json!("x".repeat(100_001)))),
        "task.instructions: at most 100000 characters (got 100001)"
    );
    assert_eq!(
        ok(&task_with("instructions", json!("x".repeat(100_000))))
            .payload
            .task
            .instructions
            .len(),
        100_000
    );
}

#[test]
fn objective_is_required_even_with_steps() {
    let raw = json!({ "payload": { "repository": "o/r", "task": { "steps": [{ "instructions": "a" }] } } });
    assert_eq!(paths(&errors(&raw)), ["task.instructions"]);
}

#[test]
fn task_is_required() {
    assert_eq!(
        error(&json!({ "payload": { "repository": "o/r" } })),
        "task: required: an object with at least instructions (the task objective)"
    );
}

#[test]
fn task_skill_defaults_to_auto() {
    let task = ok(&minimal());
    let skill = serde_json::to_value(&task.payload.task.skill).unwrap();
    assert_eq!(
        skill,
        json!({ "id": "auto", "args": {}, "requiredCapabilities": [] })
    );
}

#[test]
fn skill_args_and_capabilities_are_kept() {
    let raw = task_with(
        "skill",
        json!({ "id": "speckit", "args": { "depth": 2, "tags": ["a"] }, "requiredCapabilities": [" Node "] }),
    );
    let skill = ok(&raw).payload.task.skill;
    assert_eq!(skill.id, "speckit");
    assert_eq!(
        serde_json::Value::Object(skill.args),
        json!({ "depth": 2, "tags": ["a"] })
    );
    assert_eq!(skill.required_capabilities, ["node"]);
}

#[test]
fn skill_id_that_could_escape_a_directory_is_rejected() {
    assert_eq!(
        error(&task_with("skill", json!({ "id": "../x" }))),
        "task.skill.id: a skill id names one directory under .agents/skills/, so it cannot contain `/` or `\\`"
    );
    assert_eq!(
        error(&task_with("skill", json!({ "id": ".." }))),
        "task.skill.id: a skill id names one directory under .agents/skills/, so it cannot start with `.`"
    );
    assert_eq!(
        error(&task_with("skill", json!({ "id": "/" }))),
        "task.skill.id: a skill id names one directory under .agents/skills/, so it cannot contain `/` or `\\`"
    );
    assert_eq!(
        error(&task_with("skill", json!({ "id": "SpecKit" }))),
        "task.skill.id: use `auto` or a skill name of lowercase letters, digits, `.`, `_` and `-`, \
         starting with a letter or digit"
    );
    assert_eq!(
        error(&task_with("skill", json!({ "args": {} }))),
        "task.skill.id: required: a skill name, or \"auto\" to let the agent choose"
    );
}

#[test]
fn skill_args_must_be_an_object_and_capabilities_an_array_of_strings() {
    assert_eq!(
        error(&task_with("skill", json!({ "id": "auto", "args": [1] }))),
        "task.skill.args: expected an object (the skill's arguments by name), got an array"
    );
    assert_eq!(
        error(&task_with(
            "skill",
            json!({ "id": "auto", "requiredCapabilities": "docker" })
        )),
        "task.skill.requiredCapabilities: expected an array of strings, got a string"
    );
    assert_eq!(
        error(&task_with(
            "skill",
            json!({ "id": "auto", "requiredCapabilities": ["ok", 3] })
        )),
        "task.skill.requiredCapabilities[1]: expected a string, got a number"
    );
}

#[test]
fn git_branch_names_are_validated() {
    let git = |starting: &str, new: &str| {
        task_with(
            "git",
            json!({ "startingBranch": starting, "newBranch": new }),
        )
    };
    let task = ok(&git("main", "feature/steps"));
    assert_eq!(
        task.payload.task.git.starting_branch.as_deref(),
        Some("main")
    );
    assert_eq!(
        task.payload.task.git.new_branch.as_deref(),
        Some("feature/steps")
    );

    let errors = errors(&git("-main", "feat..x"));
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "task.git.startingBranch: a branch name cannot start with `-`",
            "task.git.newBranch: a branch name cannot contain `..`"
        ]
    );
    for bad in [
        "a b", "a~1", "x^", "a:b", "a?", "a*", "a[", "a\\b", "a@{1}", "/a", "a/", "a.", "a.lock",
        "a//b",
    ] {
        assert_eq!(
            paths(&crate::common::errors(&git("main", bad))),
            ["task.git.newBranch"],
            "{bad}"
        );
    }
}

#[test]
fn publish_mode_defaults_and_pr_fields_are_checked() {
    assert_eq!(ok(&minimal()).payload.task.publish.mode, PublishMode::Pr);
    let defaults = Defaults {
        publish_mode: PublishMode::None,
        ..Defaults::default()
    };
    assert_eq!(
        ok_with(&minimal(), &defaults).payload.task.publish.mode,
        PublishMode::None
    );

    let raw = task_with(
        "publish",
        json!({ "mode": "pr", "prBaseBranch": "develop", "commitMessage": " msg ", "prTitle": "Title", "prBody": "Body" }),
    );
    let publish = ok(&raw).payload.task.publish;
    assert_eq!(publish.pr_base_branch.as_deref(), Some("develop"));
    assert_eq!(publish.commit_message.as_deref(), Some("msg"));
    assert_eq!(publish.pr_title.as_deref(), Some("Title"));
    assert_eq!(publish.pr_body.as_deref(), Some("Body"));

    assert_eq!(
        error(&task_with("publish", json!({ "mode": "merge" }))),
        "task.publish.mode: unknown publish mode `merge`; use one of: none, branch, pr"
    );
    assert_eq!(
        error(&task_with("publish", json!({ "prTitle": "t".repeat(257) }))),
        "task.publish.prTitle: at most 256 characters (got 257)"
    );
    assert_eq!(
        error(&task_with("publish", json!({ "prBaseBranch": "a b" }))),
        "task.publish.prBaseBranch: a branch name cannot contain spaces or control characters"
    );
}

#[test]
fn auth_refs_accept_env_and_file_references() {
    let raw = with(
        minimal(),
        "/payload/auth",
        json!({ "repoAuthRef": "env://GITHUB_TOKEN", "publishAuthRef": "file:///run/secrets/gh" }),
    );
    let auth = ok(&raw).payload.auth;
    assert_eq!(auth.repo_auth_ref.as_deref(), Some("env://GITHUB_TOKEN"));
    assert_eq!(
        auth.publish_auth_ref.as_deref(),
        Some("file:///run/secrets/gh")
    );
    assert_eq!(
        error(&with(
            minimal(),
            "/payload/auth",
            json!({ "repoAuthRef": "vault:gh" })
        )),
        "auth.repoAuthRef: must be a reference, env://NAME or file:///absolute/path, never the secret itself"
    );
}

#[test]
fn raw_token_in_auth_ref_is_rejected_without_echoing_it() {
    for prefix in [
        "ghp_",
        "github_pat_11ABC_",
        "sk-proj-",
        "xoxb-1234-",
        "AKIA",
        "Bearer eyJhbGciOi.",
    ] {
        let token = format!("{prefix}Zq7Wv3kP0");
        let raw = with(
            minimal(),
            "/payload/auth",
            json!({ "publishAuthRef": token }),
        );
        let errors = errors(&raw);
        assert_eq!(paths(&errors), ["auth.publishAuthRef"], "{token}");
        let message = &errors[0].message;
        assert!(
            message.starts_with("this looks like a raw secret token"),
            "{message}"
        );
        assert!(
            !format!("{errors:?}").contains("Zq7Wv3"),
            "{message} echoes {token}"
        );
    }
}

#[test]
fn container_settings_are_checked_and_extra_fields_kept() {
    let raw = task_with(
        "container",
        json!({ "enabled": true, "image": "ghcr.io/o/i:1", "command": ["make", "test"], "workdir": "/w", "env": { "A": "1" }, "runner": { "x": 1 } }),
    );
    let container = ok(&raw).payload.task.container;
    assert!(container.enabled);
    assert_eq!(container.image.as_deref(), Some("ghcr.io/o/i:1"));
    assert_eq!(
        container.command,
        Some(vec!["make".to_string(), "test".to_string()])
    );
    assert_eq!(container.workdir(), "/w");
    assert_eq!(container.env["A"], "1");
    assert_eq!(
        Value::Object(container.extra),
        json!({ "runner": { "x": 1 } })
    );

    assert_eq!(
        error(&task_with("container", json!({ "enabled": true }))),
        "task.container.image: required when the container is enabled: the image to run, e.g. ghcr.io/org/tool:1.0"
    );
    assert_eq!(
        error(&task_with(
            "container",
            json!({ "enabled": "yes", "image": "i" })
        )),
        "task.container.enabled: expected true or false, got a string"
    );
    assert_eq!(
        error(&task_with("container", json!({ "command": "make test" }))),
        "task.container.command: expected an array of strings (the command's argv), got a string"
    );
}

#[test]
fn unknown_fields_are_rejected_everywhere() {
    let cases = [
        (
            with(minimal(), "/payload/branch", json!("x")),
            "branch",
            "repository, repo, targetRuntime, requiredCapabilities, auth, task, source",
        ),
        (
            task_with("title", json!("x")),
            "task.title",
            "instructions, skill, runtime, git, publish, steps, container, completion, notify, budget, rounds",
        ),
        (
            task_with("runtime", json!({ "modle": "x" })),
            "task.runtime.modle",
            "mode, model, effort",
        ),
        (
            task_with("git", json!({ "branch": "x" })),
            "task.git.branch",
            "startingBranch, newBranch",
        ),
        (
            task_with("publish", json!({ "draft": true })),
            "task.publish.draft",
            "mode, prBaseBranch, commitMessage, prTitle, prBody, approval, feedback",
        ),
        (
            with(minimal(), "/payload/auth", json!({ "token": "x" })),
            "auth.token",
            "repoAuthRef, publishAuthRef",
        ),
        (
            task_with("skill", json!({ "id": "auto", "version": 2 })),
            "task.skill.version",
            "id, args, requiredCapabilities",
        ),
        (
            task_with(
                "notify",
                json!({ "webhookUrl": "https://h.example/x", "email": "a@b" }),
            ),
            "task.notify.email",
            "webhookUrl",
        ),
        (
            task_with("budget", json!({ "maxTokens": 10, "maxDollars": 1 })),
            "task.budget.maxDollars",
            "maxCostUsd, maxTokens, maxMinutes",
        ),
    ];
    for (raw, path, accepted) in cases {
        let errors = errors(&raw);
        assert_eq!(paths(&errors), [path]);
        assert_eq!(
            errors[0].message,
            format!("unknown field; the accepted fields are {accepted}")
        );
    }
}

#[test]
fn odd_unknown_keys_are_quoted_in_the_path() {
    let errors = errors(&task_with("bad key\nhere", json!(1)));
    assert_eq!(paths(&errors), ["task[\"bad key\\nhere\"]"]);
}

#[test]
fn wrong_json_types_are_reported_at_their_path() {
    let cases = [
        (
            with(minimal(), "/payload/repository", json!(7)),
            "repository: expected a string, got a number",
        ),
        (
            with(minimal(), "/payload/targetRuntime", json!(true)),
            "targetRuntime: expected a string, got true/false",
        ),
        (
            with(minimal(), "/payload/requiredCapabilities", json!({})),
            "requiredCapabilities: expected an array of strings, got an object",
        ),
        (
            with(minimal(), "/payload/auth", json!("env://X")),
            "auth: expected an object, got a string",
        ),
        (
            with(minimal(), "/payload/task", json!("do it")),
            "task: expected an object, got a string",
        ),
        (
            task_with("instructions", json!(["a"])),
            "task.instructions: expected a string, got an array",
        ),
        (
            task_with("runtime", json!("codex")),
            "task.runtime: expected an object, got a string",
        ),
        (
            task_with("git", json!(1)),
            "task.git: expected an object, got a number",
        ),
        (
            task_with("publish", json!("pr")),
            "task.publish: expected an object, got a string",
        ),
        (
            task_with("skill", json!("speckit")),
            "task.skill: expected an object, got a string",
        ),
        (
            task_with("container", json!(true)),
            "task.container: expected an object, got true/false",
        ),
        (
            task_with("steps", json!(3)),
            "task.steps: expected an array of steps or a markdown checklist string, got a number",
        ),
    ];
    for (raw, expected) in cases {
        assert_eq!(error(&raw), expected);
    }
}

#[test]
fn typed_request_from_the_ui_normalizes() {
    let mut request = contract::JobRequest::default();
    request.payload.repository = "octo/repo".into();
    request.payload.task.instructions = "Ship it".into();
    request.payload.task.runtime.mode = Some(RuntimeMode::Gemini);
    request.payload.task.steps = vec![contract::StepInput {
        instructions: Some("one".into()),
        ..Default::default()
    }];
    let task = contract::normalize_request(&request, &Defaults::default()).unwrap();
    assert_eq!(task.payload.target_runtime, RuntimeMode::Gemini);
    assert_eq!(task.payload.task.steps[0].id, "step-1");
    assert_eq!(task.payload.required_capabilities, ["gemini", "git", "gh"]);

    let empty = contract::normalize_request(&contract::JobRequest::default(), &Defaults::default())
        .unwrap_err();
    assert_eq!(paths(&empty), ["repository", "task.instructions"]);
}
