//! The real agent CLIs end to end: `stepwise serve` and its embedded worker run codex,
//! claude and gemini, as pinned in agents/ (scripts/setup.sh's `setup_agents`), against a
//! scripted model server (testkit) reached through the worker's endpoint flags, the way a
//! user points them at a proxy or a gateway. One test per runtime, each in its own server,
//! data dir and model server, so they run in parallel:
//!
//! - a 2-step task behind a 200 KB objective: both edits land in the step patches, in
//!   changes.patch and in the pull request (the recorded gh shim), and nothing the CLI
//!   wrote in its HOME reaches the checkout or a patch;
//! - the live tail shows the agent's messages as whole sentences, and the step summary is
//!   its final message;
//! - the model and effort reach the model request; the API key reaches it through the
//!   environment and nowhere else;
//! - each step's usage is what the model server reported over that step's requests;
//! - a cancel mid-step kills the CLI's whole process tree (the shell command it runs).
//!
//! The CLIs are found in STEPWISE_AGENTS_BIN, else agents/node_modules/.bin.

mod common;
#[path = "sandbox/probe.rs"]
mod probe;
#[path = "real_agents/support.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use contract::JobState;
use contract::StepUsage;
use contract::job::task;
use serde_json::{Value, json};
use testkit::Recorded;
use worker::testing::alive;

use support::{
    Runtime, Setup, artifact, find_process, setup_hostile, setup_in_tmp, setup_with, step_events,
};

/// `chars` characters of text to read, most of them two bytes long, ending with `end`.
/// The contract takes up to 100,000 characters per objective or instruction, so two of
/// these make a prompt over 200 KB: as one argument, it could not even start (E2BIG).
fn large_text(chars: usize, end: &str) -> String {
    let line = "Contexte à lire : élève, été, château, naïveté, où, déjà, façade, rôle.\n";
    let mut text = String::new();
    while text.chars().count() + line.chars().count() + end.len() < chars {
        text.push_str(line);
    }
    text.push_str(end);
    text
}

const FIRST: &str = "Appended the first line to notes.txt as asked.";
const SECOND: &str = "Appended the second line, and the notes are complete.";
const THIRD: &str = "The round is done, the notes kept as they were.";
const FOURTH: &str = "Added the third line the check asked for.";

/// Runs the whole end-to-end check for one runtime. `usage` says what the CLI reports of
/// the model server's figures for one step's turns.
async fn end_to_end(runtime: Runtime, usage: fn(&[Recorded]) -> StepUsage) {
    let started = Instant::now();
    let s = setup_hostile(runtime).await;
    let objective = large_text(99_000, "END OF OBJECTIVE 7f3a");
    let reading = large_text(99_000, "END OF CONTEXT 5b1e");
    assert!(objective.len() + reading.len() > 200 * 1024);
    let job = s
        .submit(json!({
            "instructions": objective,
            "publish": { "mode": "pr", "prTitle": "Notes", "feedback": { "ci": true, "reviews": false, "maxRounds": 2 } },
            "steps": [
                { "title": "First line", "instructions": format!("{reading}\n@model shell printf 'one\\n' >> notes.txt\n@model reply {FIRST}") },
                { "title": "Second line", "instructions": format!("@model shell printf 'two\\n' >> notes.txt\n@model reply {SECOND}") },
            ],
        }))
        .await;
    let (done, events) = s.until_done(&job, Duration::from_secs(240)).await;
    let said: Vec<String> = events
        .iter()
        .map(|e| format!("{} {}", e.kind, e.message))
        .collect();
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {said:#?}");
    let mode = s.runtime.mode;
    eprintln!("{mode}: the 2-step task took {:?}", started.elapsed());

    // The edits, step by step, in the patches and in the pull request.
    let artifacts = s.artifacts(&job).await;
    let first = artifact(&artifacts, &task::step_patch(0));
    let second = artifact(&artifacts, &task::step_patch(1));
    assert!(first.contains("+one") && !first.contains("+two"), "{first}");
    assert!(
        second.contains("+two") && !second.contains("+one"),
        "{second}"
    );
    let changes = artifact(&artifacts, task::CHANGES_PATCH);
    assert!(changes.contains("+one\n+two"), "{changes}");
    let gh_log = std::fs::read_to_string(&s.gh_log).unwrap();
    assert_eq!(gh_log.matches("pr create").count(), 1, "{gh_log}");
    let context: Value = serde_json::from_str(artifact(&artifacts, task::TASK_CONTEXT)).unwrap();
    let branch = context["git"]["workingBranch"].as_str().unwrap();
    let remote = Path::new(&s.remote);
    assert_eq!(
        worker::testing::run(remote, &["show", &format!("{branch}:notes.txt")]),
        "one\ntwo"
    );
    // Nothing the CLI wrote in its HOME is in the pull request, a patch or the checkout.
    let pushed = worker::testing::run(remote, &["ls-tree", "-r", "--name-only", branch]);
    assert_eq!(
        pushed, "README.md\nnotes.txt\nsandbox-probe.sh",
        "{mode} pushed more"
    );
    for (name, body) in &artifacts {
        if name.starts_with("patches/") {
            for file in s.runtime.home_files {
                assert!(!body.contains(file), "{name} holds {file}: {body}");
            }
        }
    }
    let ws = s.workspace(&job);
    for file in s.runtime.home_files {
        assert!(
            ws.join("home").join(file).exists(),
            "{mode} wrote no {file} in its HOME"
        );
        assert!(
            !ws.join("repo").join(file).exists(),
            "{file} is in the checkout"
        );
    }

    // The live tail: whole sentences; the summary: the final message.
    let mut reported = StepUsage::default();
    for (index, reply) in [(0, FIRST), (1, SECOND)] {
        // A burst of lines travels as one event, a line each.
        let tail: Vec<&str> = step_events(&events, task::STEP_LOG, index)
            .iter()
            .flat_map(|e| e.message.lines())
            .collect();
        assert!(tail.contains(&reply), "{mode} step {index} tail: {tail:#?}");
        assert!(
            !tail
                .iter()
                .any(|line| *line == "." || reply.starts_with(line) && *line != reply),
            "a piece of the message shows alone: {tail:#?}"
        );
        let finished = step_events(&events, task::STEP_FINISHED, index);
        assert_eq!(finished.len(), 1, "{said:#?}");
        assert_eq!(
            finished[0].payload["summary"], reply,
            "{:?}",
            finished[0].payload
        );

        // Usage: what the model server reported over this step's requests.
        let turns = s.model.turns_of(&format!("{}/2", index + 1));
        assert!(turns.len() >= 2, "a tool call and a reply: {turns:?}");
        let expected = usage(&turns);
        let got: StepUsage = serde_json::from_value(finished[0].payload["usage"].clone())
            .unwrap_or_else(|e| panic!("{e}: {:?}", finished[0].payload));
        eprintln!(
            "{mode} step {}: the server reported {expected:?}; task.step.finished says {got:?}",
            index + 1
        );
        let tokens = StepUsage {
            cost_usd: None,
            duration_ms: None,
            ..got
        };
        assert_eq!(tokens, expected, "{mode} step {}", index + 1);
        // The worker timed the agent, for a budget's minutes.
        assert!(got.duration_ms.is_some_and(|ms| ms > 0), "{got:?}");
        reported = reported + expected;
        // Only claude prices a run (from its own table); nobody else's cost is made up.
        assert_eq!(
            got.cost_usd.is_some_and(|c| c > 0.0),
            mode == "claude",
            "{got:?}"
        );
    }
    // The job keeps the totals of what the model server reported over both steps.
    let total = done.usage.expect("the job's usage totals");
    eprintln!("{mode}: the server reported {reported:?} in all; the job says {total:?}");
    assert_eq!(
        StepUsage {
            cost_usd: None,
            duration_ms: None,
            ..total
        },
        reported,
        "{mode}: the job's totals"
    );

    // The whole prompt, the model and the effort reached the model; the key through the
    // environment only.
    let turns = s.model.turns_of("1/2");
    let prompt_seen = turns.iter().any(|r| {
        let texts = testkit::texts(&r.body);
        texts
            .iter()
            .any(|t| t.contains(&objective) && t.contains(&reading))
    });
    assert!(
        prompt_seen,
        "the 200 KB prompt did not reach the model whole"
    );
    let key_tail = &s.runtime.key.1[s.runtime.key.1.len() - 4..];
    for turn in &turns {
        let auth = turn
            .header("authorization")
            .or(turn.header("x-api-key"))
            .or(turn.header("x-goog-api-key"));
        assert_eq!(auth, Some(format!("…{key_tail}").as_str()), "{turn:?}");
    }
    let everything = format!("{:?}{:?}", events, artifacts);
    assert!(!everything.contains(s.runtime.key.1), "the API key leaked");
    check_model_and_effort(&s.runtime, &turns);

    its_session_goes_on_over_steps_and_rounds(&s, &job, &events).await;
    cancel_kills_the_cli_s_tree(&s).await;
    the_cli_s_shell_is_refused_every_reach(&s).await;
    eprintln!("{mode}: the whole test took {:?}", started.elapsed());
}

/// The second step continued the session the first began: its first request holds the
/// first step's prompt and reply. A follow-up round, claimed into a workspace made anew,
/// continues it too, from the session the job kept: its request holds both steps'.
async fn its_session_goes_on_over_steps_and_rounds(
    s: &Setup,
    job: &contract::Job,
    events: &[contract::JobEvent],
) {
    let mode = s.runtime.mode;
    let held = |step: &str| {
        let turns = s.model.turns_of(step);
        let first = turns
            .first()
            .unwrap_or_else(|| panic!("{mode}: no turn of {step}"));
        testkit::texts(&first.body).join("\n")
    };
    let second = held("2/2");
    assert!(
        second.contains("END OF CONTEXT 5b1e") && second.contains(FIRST),
        "{mode}: step 2 began without step 1's turns"
    );
    assert!(
        !events.iter().any(|e| e.kind == task::SESSION_RESTARTED),
        "{mode}: {events:?}"
    );
    s.user
        .follow_up(
            &job.id,
            &json!([{ "instructions": format!("@model reply {THIRD}") }]),
        )
        .await
        .unwrap();
    let (done, events) = s.until_done(job, Duration::from_secs(240)).await;
    let said: Vec<String> = events
        .iter()
        .map(|e| format!("{} {}", e.kind, e.message))
        .collect();
    assert_eq!(done.status, JobState::Succeeded, "{mode}: {said:#?}");
    assert_eq!(done.round, 2);
    let round = held("3/3");
    assert!(
        round.contains(FIRST) && round.contains(SECOND) && round.contains("END OF CONTEXT 5b1e"),
        "{mode}: the round began without the job's earlier turns"
    );
    assert!(
        !events.iter().any(|e| e.kind == task::SESSION_RESTARTED),
        "{mode}: {said:#?}"
    );
    let artifacts = s.artifacts(job).await;
    let kept = contract::session::KeptSession::read(
        artifact(&artifacts, contract::session::AGENT_SESSION).as_bytes(),
    )
    .unwrap();
    assert_eq!(kept.runtime.as_str(), mode);
    assert!(
        !kept.content.contains(s.runtime.key.1),
        "{mode}: the key is in the session"
    );

    // The pull request's CI fails: its log's end becomes the next round, in the session.
    let context: Value = serde_json::from_str(artifact(&artifacts, task::TASK_CONTEXT)).unwrap();
    let branch = context["git"]["workingBranch"]
        .as_str()
        .unwrap()
        .to_string();
    let remote = Path::new(&s.remote);
    let head = worker::testing::run(remote, &["rev-parse", &branch]);
    s.github.set_head(7, &head);
    s.github.add_check_run(
        &head,
        "notes",
        Some("failure"),
        &format!(
            "checking notes.txt\nerror: notes.txt lacks its third line\n@model shell printf 'three\\n' >> notes.txt\n@model reply {FOURTH}\n"
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(240);
    let done = loop {
        let now = s.user.get_job(&job.id).await.unwrap();
        if now.round == 3 && now.status.is_terminal() {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "{mode}: no round of feedback: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done.status, JobState::Succeeded, "{mode}: {done:?}");
    let round = held("4/4");
    assert!(
        round.contains("error: notes.txt lacks its third line")
            && round.contains(FIRST)
            && round.contains(THIRD),
        "{mode}: the round of feedback began without the log or the job's earlier turns"
    );
    assert_eq!(
        worker::testing::run(remote, &["show", &format!("{branch}:notes.txt")]),
        "one\ntwo\nthree"
    );
}

/// The CLI's own shell tool runs the sandbox probe (committed to the repository): every
/// reach is refused, and the checkout, the job's HOME and its /tmp stay writable.
async fn the_cli_s_shell_is_refused_every_reach(s: &Setup) {
    let planted = s.planted.as_ref().expect("a hostile setup");
    let pids = [s._serve.0.id()];
    let command = planted.command(&s.data, &pids);
    let job = s
        .submit(json!({
            "instructions": "Probe",
            "publish": { "mode": "none" },
            "steps": [{ "instructions": format!("@model shell {command}\n@model reply Probed.") }],
        }))
        .await;
    let (done, events) = s.until_done(&job, Duration::from_secs(120)).await;
    assert_eq!(
        done.status,
        JobState::Succeeded,
        "{}: {done:?} {:#?}",
        s.runtime.mode,
        events
            .iter()
            .map(|e| format!("{} {}", e.kind, e.message))
            .collect::<Vec<_>>()
    );
    planted.assert_held(&job.id.to_string(), &s.data, &pids);
}

fn check_model_and_effort(runtime: &Runtime, turns: &[Recorded]) {
    // Helper requests are skipped below; at least one request of the step must be checked,
    // or the test would pass without looking.
    let mut checked = 0;
    for turn in turns {
        match runtime.mode {
            "codex" => {
                assert_eq!(turn.body["model"], runtime.model);
                assert_eq!(
                    turn.body["reasoning"]["effort"], runtime.effort,
                    "{}",
                    turn.body
                );
                checked += 1;
            }
            "claude" => {
                let model = turn.body["model"].as_str().unwrap_or_default();
                if !model.starts_with("claude-opus") {
                    continue; // a helper model's request
                }
                assert_eq!(
                    turn.body["output_config"]["effort"], runtime.effort,
                    "{}",
                    turn.body
                );
                checked += 1;
            }
            _ => {
                if !turn.path.contains(":streamGenerateContent") {
                    continue; // gemini's router
                }
                assert!(turn.path.contains("/models/gemini-3"), "{}", turn.path);
                let thinking = &turn.body["generationConfig"]["thinkingConfig"];
                assert_eq!(
                    thinking["thinkingLevel"], "LOW",
                    "{}",
                    turn.body["generationConfig"]
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 0,
        "{}: no request of the step's own model was recorded, so its effort went unchecked",
        runtime.mode
    );
}

async fn cancel_kills_the_cli_s_tree(s: &Setup) {
    // A duration of its own per run, to tell its process from any other's.
    let seconds = format!("301.{}{}", std::process::id(), s.runtime.mode.len());
    let seconds = seconds.as_str();
    let job = s
        .submit(json!({
            "instructions": "Wait",
            "publish": { "mode": "none" },
            // claude refuses a bare `sleep`, so it is wrapped.
            "steps": [{ "instructions": format!("@model shell sh -c 'exec sleep {seconds}'") }],
        }))
        .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let pid = loop {
        if let Some(pid) = find_process(&["sleep", seconds]) {
            break pid;
        }
        let job = s.user.get_job(&job.id).await.unwrap();
        assert!(
            Instant::now() < deadline && !job.status.is_terminal(),
            "the agent never ran the command: {job:?} {:#?}",
            s.events(&job)
                .await
                .iter()
                .map(|e| format!("{} {}", e.kind, e.message))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let asked = Instant::now();
    s.user.cancel_job(&job.id, Some("enough")).await.unwrap();
    let (done, events) = s.until_done(&job, Duration::from_secs(60)).await;
    assert_eq!(done.status, JobState::Cancelled, "{done:?}");
    assert!(
        events.iter().any(|e| e.kind == task::STEP_CANCELLED),
        "{:#?}",
        events
            .iter()
            .map(|e| format!("{} {}", e.kind, e.message))
            .collect::<Vec<_>>()
    );
    assert!(
        !alive(pid),
        "{}: the command the CLI ran ({pid}) outlived the cancel",
        s.runtime.mode
    );
    eprintln!(
        "{}: cancel → cancelled in {:?}",
        s.runtime.mode,
        asked.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_a_task_end_to_end() {
    let runtime = Runtime {
        mode: "codex",
        model: "gpt-5.5",
        effort: "xhigh",
        // Through OPENAI_API_KEY, which codex exec itself ignores.
        flags: |url| vec!["--codex-base-url".into(), format!("{url}/v1")],
        key: ("OPENAI_API_KEY", "test-key-for-codex-2c81"),
        home_files: &[".codex/sessions", ".codex/installation_id"],
    };
    // codex adds up its turns; input counts the cached ones, reasoning is part of output.
    end_to_end(runtime, |turns| {
        turns.iter().fold(StepUsage::default(), |sum, t| {
            let u = t.usage.unwrap();
            sum + StepUsage {
                input_tokens: Some(u.input),
                cached_input_tokens: Some(u.cached),
                output_tokens: Some(u.output),
                reasoning_tokens: Some(u.reasoning),
                cost_usd: None,
                duration_ms: None,
            }
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_runs_a_task_end_to_end() {
    let runtime = Runtime {
        mode: "claude",
        model: "opus",
        effort: "low",
        // Through a variable of the operator's choosing.
        flags: |url| {
            vec![
                "--claude-base-url".into(),
                url.into(),
                "--claude-api-key-env".into(),
                "TEAM_ANTHROPIC_KEY".into(),
            ]
        },
        key: ("TEAM_ANTHROPIC_KEY", "test-key-for-claude-91fe"),
        home_files: &[".claude.json", ".claude/projects", ".claude/sessions"],
    };
    end_to_end(runtime, |turns| {
        turns.iter().fold(StepUsage::default(), |sum, t| {
            let u = t.usage.unwrap();
            sum + StepUsage {
                input_tokens: Some(u.input),
                cached_input_tokens: Some(u.cached),
                output_tokens: Some(u.output),
                // claude counts thinking from the thinking blocks it got: none here.
                reasoning_tokens: Some(0),
                cost_usd: None,
                duration_ms: None,
            }
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_runs_a_task_end_to_end() {
    let runtime = Runtime {
        mode: "gemini",
        model: "gemini-3-pro-preview",
        effort: "low",
        flags: |url| vec!["--gemini-base-url".into(), url.into()],
        key: ("GEMINI_API_KEY", "test-key-for-gemini-40d7"),
        home_files: &[
            ".gemini/projects.json",
            ".gemini/installation_id",
            ".gemini/history",
        ],
    };
    end_to_end(runtime, |turns| {
        turns.iter().fold(StepUsage::default(), |sum, t| {
            let u = t.usage.unwrap();
            sum + StepUsage {
                input_tokens: Some(u.input),
                cached_input_tokens: Some(u.cached),
                // gemini counts the answer apart from the thoughts.
                output_tokens: Some(u.output - u.reasoning),
                reasoning_tokens: Some(u.reasoning),
                cost_usd: None,
                duration_ms: None,
            }
        })
    })
    .await;
}

/// `--share-logins`: the worker user's `codex login` and claude `/login` reach the model
/// (their tokens in the request), with no API key anywhere; the copies in the job's HOME
/// are gone when the job ends, and the user's own files are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_logins_reach_codex_and_claude_and_leave_with_the_job() {
    let claude_credentials = json!({ "claudeAiOauth": {
        "accessToken": "oauth-access-token-of-the-user-5e5e",
        "refreshToken": "oauth-refresh-token-of-the-user",
        "expiresAt": 4_102_444_800_000_u64,
        "scopes": ["user:inference", "user:profile"],
        "subscriptionType": "max",
    } })
    .to_string();
    let codex_auth = r#"{"auth_mode":"apikey","OPENAI_API_KEY":"login-key-of-the-user-3d3d"}"#;
    let cases = [
        (
            Runtime {
                mode: "codex",
                model: "gpt-5.5",
                effort: "low",
                flags: |url| vec!["--codex-base-url".into(), format!("{url}/v1")],
                key: ("", "login-key-of-the-user-3d3d"),
                home_files: &[],
            },
            (".codex/auth.json", codex_auth.to_string()),
        ),
        (
            Runtime {
                mode: "claude",
                model: "opus",
                effort: "low",
                flags: |url| vec!["--claude-base-url".into(), url.into()],
                key: ("", "oauth-access-token-of-the-user-5e5e"),
                home_files: &[],
            },
            (".claude/.credentials.json", claude_credentials.clone()),
        ),
    ];
    for (runtime, (file, body)) in cases {
        let secret = runtime.key.1;
        let mode = runtime.mode;
        let s = setup_with(runtime, Some(&[(file, body.as_str())])).await;
        let job = s
            .submit(json!({
                "instructions": "Use my login",
                "publish": { "mode": "none" },
                "steps": [{ "instructions": "@model shell printf 'x\\n' >> a.txt\n@model reply Done with the login." }],
            }))
            .await;
        let (done, events) = s.until_done(&job, Duration::from_secs(120)).await;
        assert_eq!(
            done.status,
            JobState::Succeeded,
            "{mode}: {done:?} {events:#?}"
        );
        let turns = s.model.turns_of("1/1");
        assert!(!turns.is_empty());
        let tail = &secret[secret.len() - 4..];
        for turn in &turns {
            assert_eq!(
                turn.header("authorization"),
                Some(format!("…{tail}").as_str()),
                "{mode}: {turn:?}"
            );
        }
        let home = s.workspace(&job).join("home");
        assert!(home.is_dir(), "the workspace is kept");
        assert!(
            !home.join(file).exists(),
            "{mode}: the copy of {file} outlived the job"
        );
        let user_file = s.data.parent().unwrap().join("user-home").join(file);
        assert_eq!(
            std::fs::read_to_string(user_file).unwrap(),
            body,
            "{mode}: the user's own changed"
        );
        let artifacts = s.artifacts(&job).await;
        let everything = format!("{events:?}{artifacts:?}");
        assert!(!everything.contains(secret), "{mode}: the login leaked");
        let prepare = artifact(&artifacts, "logs/prepare.log");
        assert!(
            prepare.contains(&format!("{mode} login shared: ~/{file}")),
            "{prepare}"
        );
    }
}

/// Without our box (`--sandbox off`) codex keeps its own, which on a machine with Debian's
/// bubblewrap cannot start its commands when codex's HOME is in the temporary folder
/// (AGENT_CLIS.md): every command fails, and codex still ends its turn "done". The worker
/// gives each step the job's own TMPDIR, so even a workspace under /tmp works: the edit
/// lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_without_our_box_edits_files_where_bubblewrap_is_installed() {
    assert!(
        Path::new("/usr/bin/bwrap").exists(),
        "this test needs Debian's bubblewrap installed (scripts/setup.sh does)"
    );
    let s = setup_in_tmp(Runtime {
        mode: "codex",
        model: "gpt-5.5",
        effort: "low",
        flags: |url| {
            vec![
                "--codex-base-url".into(),
                format!("{url}/v1"),
                "--sandbox".into(),
                "off".into(),
            ]
        },
        key: ("CODEX_API_KEY", "test-key-for-codex-7a7a"),
        home_files: &[],
    })
    .await;
    let job = s
        .submit(json!({
            "instructions": "Write",
            "publish": { "mode": "none" },
            "steps": [{ "instructions": "@model shell printf 'x\\n' >> a.txt\n@model reply All done." }],
        }))
        .await;
    let (done, events) = s.until_done(&job, Duration::from_secs(120)).await;
    let said: Vec<String> = events
        .iter()
        .map(|e| format!("{} {}", e.kind, e.message))
        .collect();
    assert_eq!(done.status, JobState::Succeeded, "{said:#?}");
    let written = std::fs::read_to_string(s.workspace(&job).join("repo/a.txt"));
    assert_eq!(written.ok().as_deref(), Some("x\n"), "{said:#?}");
}
