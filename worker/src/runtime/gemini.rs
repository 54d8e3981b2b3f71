//! `gemini -p ""`: the prompt on stdin (appended to the empty `-p`), in the process's
//! working directory. It has no effort flag (`--effort` is an unknown argument, exit 1):
//! thinking is set in `.gemini/settings.json` under the job's HOME, on gemini's model-family
//! configs (`chat-base-3`, `chat-base-2.5`) rather than on the requested model, because
//! gemini swaps model names (it sent `gemini-3-pro-preview` as `gemini-3.1-pro-preview`)
//! and picks one itself when the task names none. The same file selects API-key auth.
//! `--approval-mode yolo` runs tools without asking, and `--skip-trust` spares the exit 55
//! of an untrusted directory.

use contract::StepUsage;
use serde_json::{Value, json};

use super::{Invocation, Progress, SessionArg, StepRun, count, text};

/// `~/.gemini/tmp/<the cwd's basename>/chats/session-<start minute>-<id[..8]>.jsonl`: a
/// resume in a later minute leaves a stub beside it, which the largest is not.
pub(super) fn session_file(home: &std::path::Path, id: &str) -> Option<std::path::PathBuf> {
    let short: String = id.chars().take(8).collect();
    let ends = [format!("-{short}.jsonl"), format!("-{short}.json")];
    super::session::largest(&home.join(".gemini/tmp"), 2, &|n| {
        n.starts_with("session-") && ends.iter().any(|e| n.ends_with(e.as_str()))
    })
}

/// Gemini 2.5 takes a token budget for thinking; these follow its low / medium / high.
const THINKING_BUDGETS: [(&str, u32); 3] = [("low", 1024), ("medium", 8192), ("high", 24576)];

/// The model-family configs every chat model of gemini extends, and how each takes effort.
const GEMINI_3: &str = "chat-base-3";
const GEMINI_2_5: &str = "chat-base-2.5";

pub(super) fn build(run: &StepRun<'_>, invocation: &mut Invocation) {
    let mut args: Vec<String> = vec!["-p".into(), String::new()];
    if let Some(model) = &run.runtime.model {
        args.extend(["-m".into(), model.clone()]);
    }
    match run.session {
        SessionArg::Begin(Some(id)) => args.extend(["--session-id".into(), id.clone()]),
        SessionArg::Begin(None) => {}
        SessionArg::Continue(id) => args.extend(["--resume".into(), id.clone()]),
    }
    args.extend([
        "--approval-mode".into(),
        "yolo".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--skip-trust".into(),
    ]);
    invocation.args = args;
    let auth = run
        .endpoint
        .auth_type
        .clone()
        .unwrap_or_else(|| "gemini-api-key".into());
    // Its cleanup of expired sessions deletes every file that ends in a session's first
    // 8 characters, the one a later resume continues included: off, as the job's HOME is
    // the job's alone and goes with it.
    let mut settings = json!({
        "security": { "auth": { "selectedType": auth } },
        "general": { "sessionRetention": { "enabled": false } },
    });
    if let Some(effort) = &run.runtime.effort {
        let (overrides, note) = thinking(run.runtime.model.as_deref(), effort);
        settings["modelConfigs"] = json!({ "customOverrides": overrides });
        invocation.notes.extend(note);
    }
    invocation.files.push((
        run.home.join(".gemini").join("settings.json"),
        format!("{settings:#}\n"),
    ));
    if let Some(url) = &run.endpoint.base_url {
        invocation
            .env
            .push(("GOOGLE_GEMINI_BASE_URL".into(), url.clone()));
    }
    if let Some(key) = &run.endpoint.api_key {
        invocation.env.push(("GEMINI_API_KEY".into(), key.clone()));
    }
}

/// Overrides that set `effort` on both families, whichever model gemini ends up using;
/// with a note when Gemini 3, which thinks LOW or HIGH only, may run it approximated.
fn thinking(model: Option<&str>, effort: &str) -> (Value, Option<String>) {
    let level = match effort {
        "low" => "LOW",
        _ => "HIGH",
    };
    let budget = THINKING_BUDGETS
        .iter()
        .find(|(e, _)| *e == effort)
        .map_or(8192, |(_, b)| *b);
    let family = |name: &str, config: Value| {
        json!({
            "match": { "model": name },
            "modelConfig": { "generateContentConfig": { "thinkingConfig": config } },
        })
    };
    let overrides = json!([
        family(GEMINI_3, json!({ "thinkingLevel": level })),
        family(GEMINI_2_5, json!({ "thinkingBudget": budget })),
    ]);
    let may_be_3 = model.is_none_or(|m| !m.starts_with("gemini-2"));
    let note = (effort == "medium" && may_be_3).then(|| {
        format!(
            "Gemini 3 models think at LOW or HIGH: effort medium runs as HIGH on {}",
            model.unwrap_or("the model gemini picks")
        )
    });
    (overrides, note)
}

pub(super) fn parse(event: &Value) -> Vec<Progress> {
    match event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "message" if event.get("role").and_then(Value::as_str) == Some("assistant") => {
            let content = event.get("content").and_then(Value::as_str).unwrap_or("");
            if event.get("delta").and_then(Value::as_bool) == Some(true) {
                // Pieces are kept exactly: " done" and "." only read right once joined.
                return vec![Progress::Piece(content.to_string())];
            }
            text(event, "content")
                .map(Progress::Message)
                .into_iter()
                .collect()
        }
        "init" => text(event, "session_id")
            .map(Progress::Session)
            .into_iter()
            .collect(),
        "tool_use" => text(event, "tool_name")
            .map(Progress::Action)
            .into_iter()
            .collect(),
        "error" => text(event, "message")
            .map(Progress::Error)
            .into_iter()
            .collect(),
        "result" => {
            let mut out: Vec<Progress> = usage(event).map(Progress::Usage).into_iter().collect();
            out.push(Progress::Finished {
                ok: event.get("status").and_then(Value::as_str) == Some("success"),
                summary: event.get("error").and_then(|e| text(e, "message")),
            });
            out
        }
        _ => Vec::new(),
    }
}

/// `result.stats`: every model of the run (its router's too). `input_tokens` counts the
/// cached ones as well. The stats name no thoughts: gemini 0.61 sums each response's
/// `totalTokenCount` (prompt + candidates + thoughts) into `total_tokens`, so the thoughts
/// are what the total holds beyond input and output.
fn usage(event: &Value) -> Option<StepUsage> {
    let stats = event.get("stats")?;
    let input_tokens = count(stats, "/input_tokens");
    let output_tokens = count(stats, "/output_tokens");
    let thoughts = match (count(stats, "/total_tokens"), input_tokens, output_tokens) {
        (Some(total), Some(input), Some(output)) => {
            Some(total.saturating_sub(input + output)).filter(|&t| t > 0)
        }
        _ => None,
    };
    let found = StepUsage {
        input_tokens,
        cached_input_tokens: count(stats, "/cached"),
        output_tokens,
        reasoning_tokens: thoughts,
        cost_usd: None,
        duration_ms: None,
    };
    (!found.is_empty()).then_some(found)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use contract::RuntimeMode;

    use super::super::{Endpoint, Reader, build_for, build_with, parse_line, settings};
    use super::*;

    fn written(built: &Invocation) -> Value {
        let [(path, body)] = built.files.as_slice() else {
            panic!("one settings file: {:?}", built.files);
        };
        assert_eq!(path, &PathBuf::from("/w/job/home/.gemini/settings.json"));
        serde_json::from_str(body).unwrap()
    }

    fn thinking_of(settings: &Value, family: &str) -> Value {
        settings["modelConfigs"]["customOverrides"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["match"]["model"] == family)
            .map(|o| o["modelConfig"]["generateContentConfig"]["thinkingConfig"].clone())
            .unwrap_or_else(|| panic!("no override for {family}: {settings:#}"))
    }

    #[test]
    fn argv_never_carries_an_effort_flag_and_the_prompt_comes_on_stdin() {
        let built = build_for(&settings(
            RuntimeMode::Gemini,
            Some("gemini-3-pro-preview"),
            Some("high"),
        ));
        assert_eq!(built.program.to_str(), Some("gemini"));
        assert_eq!(
            built.args,
            [
                "-p",
                "",
                "-m",
                "gemini-3-pro-preview",
                "--approval-mode",
                "yolo",
                "--output-format",
                "stream-json",
                "--skip-trust",
            ]
        );
        assert_eq!(built.stdin.as_deref(), Some("Fix the build"));
        assert!(!built.args.iter().any(|a| a.contains("effort") || a == "-y"));
    }

    #[test]
    fn effort_is_set_on_the_model_families_so_a_swapped_or_picked_model_keeps_it() {
        for model in [Some("gemini-3-pro-preview"), None, Some("gemini-2.5-pro")] {
            let built = build_for(&settings(RuntimeMode::Gemini, model, Some("low")));
            let file = written(&built);
            assert_eq!(
                thinking_of(&file, "chat-base-3"),
                json!({ "thinkingLevel": "LOW" })
            );
            assert_eq!(
                thinking_of(&file, "chat-base-2.5"),
                json!({ "thinkingBudget": 1024 })
            );
            assert!(
                !file.to_string().contains("gemini-3-pro-preview"),
                "matched on the family, not the name gemini may swap: {file:#}"
            );
            assert!(built.notes.is_empty(), "{:?}", built.notes);
        }
        let high = written(&build_for(&settings(
            RuntimeMode::Gemini,
            None,
            Some("high"),
        )));
        assert_eq!(
            thinking_of(&high, "chat-base-2.5"),
            json!({ "thinkingBudget": 24576 })
        );
    }

    #[test]
    fn medium_on_gemini_3_is_said_to_run_as_high() {
        let medium = build_for(&settings(
            RuntimeMode::Gemini,
            Some("gemini-3-flash"),
            Some("medium"),
        ));
        assert_eq!(
            thinking_of(&written(&medium), "chat-base-3"),
            json!({ "thinkingLevel": "HIGH" })
        );
        assert!(
            medium.notes[0].contains("runs as HIGH"),
            "{:?}",
            medium.notes
        );
        let older = build_for(&settings(
            RuntimeMode::Gemini,
            Some("gemini-2.5-flash"),
            Some("medium"),
        ));
        assert_eq!(
            thinking_of(&written(&older), "chat-base-2.5"),
            json!({ "thinkingBudget": 8192 })
        );
        assert!(older.notes.is_empty());
    }

    #[test]
    fn api_key_auth_is_selected_and_the_endpoint_passed_on() {
        let built = build_for(&settings(RuntimeMode::Gemini, None, None));
        let plain = written(&built);
        assert_eq!(plain["security"]["auth"]["selectedType"], "gemini-api-key");
        assert!(plain.get("modelConfigs").is_none());
        let endpoint = Endpoint {
            base_url: Some("http://127.0.0.1:9".into()),
            api_key: Some("AIza-example".into()),
            auth_type: Some("oauth-personal".into()),
        };
        let built = build_with(&settings(RuntimeMode::Gemini, None, None), &endpoint);
        assert_eq!(
            built.env_value("GOOGLE_GEMINI_BASE_URL"),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(built.env_value("GEMINI_API_KEY"), Some("AIza-example"));
        assert_eq!(
            written(&built)["security"]["auth"]["selectedType"],
            "oauth-personal"
        );
        // Else its cleanup deletes a session a later step continues.
        assert_eq!(
            written(&built)["general"]["sessionRetention"]["enabled"],
            false
        );
    }

    #[test]
    fn stream_json_becomes_progress_with_messages_whole() {
        let lines = [
            r#"{"type":"init","session_id":"s"}"#,
            r#"{"type":"message","role":"user","content":"Fix the build"}"#,
            r#"{"type":"message","role":"assistant","content":"Looking","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":" at it.","delta":true}"#,
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1"}"#,
            r#"{"type":"message","role":"assistant","content":"All","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":" done","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":".","delta":true}"#,
            r#"{"type":"result","status":"success","stats":{"total_tokens":1314,"input_tokens":1200,"output_tokens":100,"cached":300,"input":900,"duration_ms":5,"tool_calls":1}}"#,
        ];
        let mut reader = Reader::new(RuntimeMode::Gemini);
        let got: Vec<Progress> = lines.iter().flat_map(|l| reader.line(l)).collect();
        assert_eq!(
            got,
            [
                Progress::Session("s".into()),
                Progress::Message("Looking at it.".into()),
                Progress::Action("run_shell_command".into()),
                Progress::Message("All done.".into()),
                Progress::Usage(StepUsage {
                    input_tokens: Some(1200),
                    cached_input_tokens: Some(300),
                    output_tokens: Some(100),
                    // 14 thoughts: the total beyond input and output.
                    reasoning_tokens: Some(14),
                    cost_usd: None,
                    duration_ms: None,
                }),
                Progress::Finished {
                    ok: true,
                    summary: None
                },
            ]
        );
        assert_eq!(
            parse_line(
                RuntimeMode::Gemini,
                r#"{"type":"result","status":"error","error":{"message":"quota exceeded"}}"#
            ),
            [Progress::Finished {
                ok: false,
                summary: Some("quota exceeded".into())
            }]
        );
    }
}
