use contract::{
    ChecklistItem, Defaults, NormalizedTask, PublishMode, RuntimeDefaults, RuntimeMode, normalize,
    parse_checklist, render_checklist,
};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Map, Value, json};

use crate::common::seed;

/// Field names of the contract, so random trees often reach deep validation code.
const KEYS: &[&str] = &[
    "type",
    "priority",
    "maxAttempts",
    "affinityKey",
    "payload",
    "repository",
    "repo",
    "targetRuntime",
    "requiredCapabilities",
    "auth",
    "repoAuthRef",
    "publishAuthRef",
    "task",
    "instructions",
    "skill",
    "id",
    "args",
    "runtime",
    "mode",
    "model",
    "effort",
    "git",
    "startingBranch",
    "newBranch",
    "publish",
    "prBaseBranch",
    "commitMessage",
    "prTitle",
    "prBody",
    "steps",
    "title",
    "container",
    "enabled",
    "image",
    "command",
];

const STRINGS: &[&str] = &[
    "task",
    "codex",
    "claude",
    "gemini",
    "pr",
    "branch",
    "none",
    "auto",
    "speckit",
    "../x",
    "high",
    "max",
    "owner/repo",
    "env://TOKEN",
    "ghp_secret",
    "- [ ] a step\n- [x] done",
    "# h\nstray",
    "",
    " ",
    "step-1",
    "main",
    "a..b",
    "\u{0}",
    "é",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        select(STRINGS).prop_map(Value::from),
    ];
    let key = prop_oneof![3 => select(KEYS).prop_map(str::to_string), 1 => any::<String>()];
    leaf.prop_recursive(5, 96, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..8)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every JSON pointer inside `v`, the root included.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => map
            .iter()
            .for_each(|(k, child)| pointers(child, format!("{at}/{k}"), out)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, child)| pointers(child, format!("{at}/{i}"), out)),
        _ => {}
    }
    out.push(at);
}

#[derive(Debug, Clone)]
enum Mutation {
    Remove(Index),
    Replace(Index, Value),
}

fn mutate(mut v: Value, mutation: &Mutation) -> Value {
    let mut all = Vec::new();
    pointers(&v, String::new(), &mut all);
    match mutation {
        Mutation::Replace(i, new) => {
            if let Some(slot) = v.pointer_mut(i.get(&all).as_str()) {
                *slot = new.clone();
            }
        }
        Mutation::Remove(i) => {
            let target = i.get(&all).as_str();
            if let Some((parent, last)) = target.rsplit_once('/') {
                match v.pointer_mut(parent) {
                    Some(Value::Object(map)) => {
                        map.remove(last);
                    }
                    Some(Value::Array(items)) => {
                        if let Ok(n) = last.parse::<usize>()
                            && n < items.len()
                        {
                            items.remove(n);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    v
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Remove),
        (any::<Index>(), arb_json()).prop_map(|(i, v)| Mutation::Replace(i, v)),
    ]
}

/// Whatever `normalize` accepts, it accepts again unchanged from its own output, and holds
/// no NUL (PostgreSQL could not store it). Whatever it refuses, it says why, one short
/// line per field, whatever the input held.
fn assert_stable(raw: &Value, defaults: &Defaults) -> Result<(), TestCaseError> {
    match normalize(raw, defaults) {
        Ok(task) => {
            let stored = serde_json::to_value(&task).unwrap();
            prop_assert!(!stored.to_string().contains("\\u0000"), "{}", stored);
            let again = normalize(&stored, defaults);
            prop_assert_eq!(again, Ok(task));
        }
        Err(errors) => {
            prop_assert!(!errors.is_empty());
            for error in &errors {
                prop_assert!(!error.message.is_empty());
                for text in [&error.path, &error.message] {
                    prop_assert!(text.len() <= 600, "too long: {}", text);
                    prop_assert!(!text.contains(['\n', '\0']), "not one line: {:?}", text);
                }
            }
        }
    }
    Ok(())
}

/// Text a client might send to hurt: NUL and other control characters, markup, huge and
/// odd Unicode.
fn arb_hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,8}\u{0}[a-z]{0,8}",
        "[\u{0}-\u{1f}\u{7f}]{1,8}",
        Just("</title><img src=x onerror=alert(1)>".to_string()),
        Just("\u{202e}\u{feff}\u{fffd}\u{10ffff}".to_string()),
        "x{0,3}".prop_map(|x| format!("{x}{}", "é".repeat(70_000))),
        any::<String>(),
    ]
}

/// `raw` with one of its strings (keys excluded) replaced by `text`.
fn with_text(mut raw: Value, at: &Index, text: String) -> Value {
    let mut all = Vec::new();
    pointers(&raw, String::new(), &mut all);
    let strings: Vec<&String> = all
        .iter()
        .filter(|p| raw.pointer(p).is_some_and(Value::is_string))
        .collect();
    if !strings.is_empty() {
        let pointer = at.get(&strings).to_string();
        if let Some(slot) = raw.pointer_mut(&pointer) {
            *slot = Value::String(text);
        }
    }
    raw
}

/// The fuzz run: the properties above on generated requests for as long as
/// `STEPWISE_FUZZ_SECONDS` says (default 10), with a fresh seed each round. CI runs it in
/// the release profile: `cargo test --release -p contract --test task_contract -- --ignored`.
#[test]
#[ignore = "a timed fuzz run; CI runs it with --ignored in the release profile"]
fn fuzz_normalize_for_a_fixed_time() {
    use proptest::test_runner::{Config, TestRunner};
    use std::time::{Duration, Instant};
    let seconds = std::env::var("STEPWISE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10u64);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut cases = 0u64;
    let strategy = prop_oneof![
        (arb_json(), arb_defaults()).boxed(),
        prop::collection::vec(arb_mutation(), 1..6)
            .prop_map(|m| m.iter().fold(seed(), mutate))
            .prop_flat_map(|raw| (Just(raw), arb_defaults()))
            .boxed(),
        (
            arb_valid_request(),
            prop::collection::vec(arb_mutation(), 0..4)
        )
            .prop_map(|(raw, m)| m.iter().fold(raw, mutate))
            .prop_flat_map(|raw| (Just(raw), arb_defaults()))
            .boxed(),
    ];
    let strategy = prop_oneof![
        3 => strategy,
        1 => (arb_valid_request(), any::<Index>(), arb_hostile_text(), arb_defaults())
            .prop_map(|(raw, at, text, defaults)| (with_text(raw, &at, text), defaults))
            .boxed(),
    ];
    while Instant::now() < deadline {
        let config = Config {
            cases: 2_000,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        if let Err(e) = runner.run(&strategy, |(raw, defaults)| assert_stable(&raw, &defaults)) {
            panic!("normalize failed a property after {cases} cases: {e}");
        }
        cases += 2_000;
    }
    let per_second = cases as f64 / started.elapsed().as_secs_f64();
    println!("fuzzed normalize with {cases} requests in {seconds} s ({per_second:.0}/s)");
}

fn arb_runtime_defaults(runtime: RuntimeMode) -> impl Strategy<Value = RuntimeDefaults> {
    (
        prop::option::of("[a-z0-9.-]{1,12}"),
        prop::option::of(select(runtime.efforts())),
    )
        .prop_map(|(model, effort)| RuntimeDefaults {
            model,
            effort: effort.map(str::to_string),
        })
}

fn arb_defaults() -> impl Strategy<Value = Defaults> {
    (
        select(&RuntimeMode::ALL[..]),
        select(&PublishMode::ALL[..]),
        arb_runtime_defaults(RuntimeMode::Codex),
        arb_runtime_defaults(RuntimeMode::Claude),
        arb_runtime_defaults(RuntimeMode::Gemini),
    )
        .prop_map(|(runtime, publish_mode, codex, claude, gemini)| Defaults {
            runtime,
            publish_mode,
            approval_required: false,
            budget_usd: None,
            codex,
            claude,
            gemini,
        })
}

fn arb_capabilities() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[ ]?[A-Za-z][A-Za-z0-9:.-]{0,6}[ ]?", 0..4)
}

fn arb_skill() -> impl Strategy<Value = Value> {
    (
        select(&["auto", "speckit", "lint", "deploy"][..]),
        arb_capabilities(),
        any::<bool>(),
    )
        .prop_map(|(id, caps, with_args)| {
            let args = if with_args {
                json!({ "depth": 2 })
            } else {
                json!({})
            };
            json!({ "id": id, "args": args, "requiredCapabilities": caps })
        })
}

fn arb_step() -> impl Strategy<
    Value = (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<Value>,
    ),
> {
    (
        prop::option::of("[a-z][a-z0-9]{0,5}"),
        prop::option::of("[A-Za-z][A-Za-z ]{0,20}"),
        prop::option::of("[A-Za-z][A-Za-z \n]{0,30}"),
        prop::option::of(arb_skill()),
    )
}

fn step_json(
    index: usize,
    (id, title, instructions, skill): (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<Value>,
    ),
) -> Value {
    let mut step = Map::new();
    // Suffixing the index keeps explicit ids unique and unlike generated `step-N` ids.
    if let Some(id) = id {
        step.insert("id".into(), json!(format!("{id}x{index}")));
    }
    if let Some(title) = title {
        step.insert("title".into(), json!(title));
    }
    let skill_is_auto = skill.as_ref().is_none_or(|s| s["id"] == "auto");
    match instructions {
        Some(text) => step.insert("instructions".into(), json!(text)),
        // A blank step is rejected by design; give it something to do.
        None if skill_is_auto => step.insert("instructions".into(), json!("continue")),
        None => None,
    };
    if let Some(skill) = skill {
        step.insert("skill".into(), skill);
    }
    Value::Object(step)
}

fn arb_valid_request() -> impl Strategy<Value = Value> {
    let settings = (
        prop::option::of(select(&RuntimeMode::ALL[..])),
        0..3usize,
        prop::option::of(select(&PublishMode::ALL[..])),
        prop::option::of("[a-z0-9.-]{1,12}"),
        prop::option::of(any::<Index>()),
    );
    let extras = (
        prop::option::of(select(&["main", "feature/x", "release/v1.2"][..])),
        prop::option::of(select(&["env://GH_TOKEN", "file:///run/secrets/gh"][..])),
        prop::option::of("[a-z][a-z0-9-]{0,10}"),
        prop::option::of(prop::collection::vec("[A-Za-z][A-Za-z ,]{0,20}", 1..4)),
    );
    let content = (
        "[A-Za-z][A-Za-z0-9 ,.\n]{0,40}",
        arb_capabilities(),
        prop::option::of(arb_skill()),
        prop::collection::vec(arb_step(), 0..5),
        -1000..=1000i32,
        1..=10u32,
        any::<bool>(),
    );
    (settings, content, extras).prop_map(
        |(
            (runtime, runtime_at, publish, model, effort),
            (objective, caps, skill, steps, priority, attempts, container),
            (branch, auth, affinity, checklist),
        )| {
            let mut task = Map::new();
            task.insert("instructions".into(), json!(objective));
            let mut runtime_obj = json!({ "model": model });
            let effort_runtime = runtime.unwrap_or(RuntimeMode::Codex);
            if let (Some(i), Some(_)) = (effort, runtime) {
                runtime_obj["effort"] = json!(i.get(effort_runtime.efforts()));
            }
            let mut payload = json!({ "repository": "octo/repo", "requiredCapabilities": caps });
            if let Some(mode) = runtime {
                if runtime_at != 1 {
                    payload["targetRuntime"] = json!(mode.as_str());
                }
                if runtime_at != 0 {
                    runtime_obj["mode"] = json!(mode.as_str());
                }
            }
            task.insert("runtime".into(), runtime_obj);
            task.insert("git".into(), json!({ "startingBranch": branch, "newBranch": branch.map(|b| format!("{b}-work")) }));
            payload["auth"] = json!({ "repoAuthRef": auth, "publishAuthRef": auth });
            if let Some(skill) = skill {
                task.insert("skill".into(), skill);
            }
            if let Some(mode) = publish {
                task.insert("publish".into(), json!({ "mode": mode.as_str() }));
            }
            let steps: Vec<Value> = steps.into_iter().enumerate().map(|(i, s)| step_json(i, s)).collect();
            // Steps and an enabled container are mutually exclusive by design.
            if container && steps.is_empty() {
                task.insert("container".into(), json!({ "enabled": true, "image": "alpine:3", "workdir": "/w" }));
            }
            let steps = match checklist {
                // The markdown form of steps, when there is no container to conflict with.
                Some(items) if !container => {
                    json!(items.iter().map(|t| format!("- [ ] {t}")).collect::<Vec<_>>().join("\n"))
                }
                _ => Value::Array(steps),
            };
            task.insert("steps".into(), steps);
            payload["task"] = Value::Object(task);
            json!({
                "type": "task", "priority": priority, "maxAttempts": attempts,
                "affinityKey": affinity, "payload": payload
            })
        },
    )
}

proptest! {
    #[test]
    fn normalize_never_panics_on_arbitrary_json(raw in arb_json(), defaults in arb_defaults()) {
        assert_stable(&raw, &defaults)?;
    }

    #[test]
    fn normalize_never_panics_on_a_mutated_seed_example(mutations in prop::collection::vec(arb_mutation(), 1..4)) {
        let raw = mutations.iter().fold(seed(), mutate);
        assert_stable(&raw, &Defaults::default())?;
    }

    #[test]
    fn normalizing_a_normalized_task_gives_the_same_task(raw in arb_valid_request(), defaults in arb_defaults()) {
        let task = normalize(&raw, &defaults);
        prop_assert!(task.is_ok(), "generated request was rejected: {:?}\n{}", task, raw);
        let task = task.unwrap();
        let again = normalize(&serde_json::to_value(&task).unwrap(), &defaults);
        prop_assert_eq!(again, Ok(task.clone()));
        let stored: NormalizedTask = serde_json::from_value(serde_json::to_value(&task).unwrap()).unwrap();
        prop_assert_eq!(&stored, &task);
        // The derived list always starts with the runtime and git, and has no duplicates.
        let caps = &task.payload.required_capabilities;
        prop_assert_eq!(&caps[..2], &[task.payload.target_runtime.as_str().to_string(), "git".to_string()]);
        let mut unique = caps.clone();
        unique.sort();
        unique.dedup();
        prop_assert_eq!(unique.len(), caps.len());
        prop_assert_eq!(task.resolved_steps().len(), task.payload.task.steps.len().max(1));
    }

    #[test]
    fn checklist_render_then_parse_round_trips(
        texts in prop::collection::vec("[A-Za-z0-9]([A-Za-z0-9 ,.!?'-]{0,30}[A-Za-z0-9])?", 0..8),
        done in 0..10usize,
    ) {
        let items: Vec<ChecklistItem> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| ChecklistItem { checked: i < done, text: text.clone() })
            .collect();
        prop_assert_eq!(parse_checklist(&render_checklist(&items, done)), Ok(items.clone()));

        if !texts.is_empty() {
            let steps: Vec<Value> = texts.iter().map(|t| json!({ "instructions": t })).collect();
            let raw = crate::common::task_with("steps", Value::Array(steps));
            let resolved = crate::common::ok(&raw).resolved_steps();
            prop_assert_eq!(parse_checklist(&render_checklist(&resolved, done)), Ok(items));
        }
    }
}
