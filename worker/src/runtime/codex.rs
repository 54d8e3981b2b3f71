//! `codex exec`: `--json` for JSONL events, the prompt on stdin (`-`). exec never asks for
//! approval. In the worker's sandbox, codex's own is off (`danger-full-access`): ours
//! replaces it, and a second bubblewrap inside ours cannot start, so every command would
//! fail while codex still answers "done". Without ours (`--sandbox off`), codex keeps its
//! own, `workspace-write` with the network open so an agent can fetch dependencies as
//! claude's and gemini's can; where the system's bubblewrap is installed that sandbox cannot
//! start its helper, which `parse` reports as the step's failure. It keeps its
//! config in `$HOME/.codex`, which it makes itself when only HOME is set; a `CODEX_HOME`
//! of the worker's own is removed, since one naming a missing folder stops codex at once.
//! exec sends an API key only from `CODEX_API_KEY` (not `OPENAI_API_KEY`). Offline it
//! waits for the network forever, so the worker's own timeout is what ends it.

use contract::StepUsage;
use serde_json::Value;

use super::{Invocation, Progress, SessionArg, StepRun, api_error, count, text};

/// `~/.codex/sessions/YYYY/MM/DD/rollout-<start>-<id>.jsonl`, dated when it began.
pub(super) fn session_file(home: &std::path::Path, id: &str) -> Option<std::path::PathBuf> {
    let end = format!("-{id}.jsonl");
    super::session::largest(&home.join(".codex/sessions"), 3, &|n| {
        n.starts_with("rollout-") && n.ends_with(end.as_str())
    })
}

pub(super) fn build(run: &StepRun<'_>, invocation: &mut Invocation) {
    let mut args: Vec<String> = Vec::new();
    if let Some(url) = &run.endpoint.base_url {
        // A global option, before `exec`; the OPENAI_BASE_URL variable is ignored.
        args.extend(["-c".into(), format!("openai_base_url={url}")]);
    }
    args.extend([
        "exec".into(),
        "--json".into(),
        // The worker checks the repository out itself; this only spares a refusal when
        // a task runs outside one.
        "--skip-git-repo-check".into(),
        "-C".into(),
        run.repo.display().to_string(),
        "--sandbox".into(),
    ]);
    if run.sandboxed {
        args.push("danger-full-access".into());
    } else {
        args.extend([
            "workspace-write".into(),
            "-c".into(),
            "sandbox_workspace_write.network_access=true".into(),
        ]);
    }
    if let Some(model) = &run.runtime.model {
        args.extend(["-m".into(), model.clone()]);
    }
    if let Some(effort) = &run.runtime.effort {
        // There is no --effort flag (exit 2): effort is a config override.
        args.extend(["-c".into(), format!("model_reasoning_effort={effort}")]);
    }
    // `resume` comes after exec's own options (before them: exit 2); codex names a new
    // session itself.
    if let SessionArg::Continue(id) = run.session {
        args.extend(["resume".into(), id.clone()]);
    }
    args.push("-".into());
    invocation.args = args;
    invocation.env_remove.push("CODEX_HOME".into());
    if let Some(key) = &run.endpoint.api_key {
        invocation.env.push(("CODEX_API_KEY".into(), key.clone()));
    }
}

pub(super) fn parse(event: &Value) -> Vec<Progress> {
    let kind = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "item.completed" => {
            let Some(item) = event.get("item") else {
                return Vec::new();
            };
            match item.get("type").and_then(Value::as_str).unwrap_or_default() {
                "agent_message" => text(item, "text")
                    .map(Progress::Message)
                    .into_iter()
                    .collect(),
                "command_execution" => text(item, "command")
                    .map(|c| Progress::Action(format!("ran {c}")))
                    .into_iter()
                    .collect(),
                "file_change" => vec![Progress::Action("changed files".into())],
                // Not fatal: a fallback, a model the CLI knows nothing about.
                "error" => text(item, "message")
                    .map(Progress::Error)
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            }
        }
        "thread.started" => text(event, "thread_id")
            .map(Progress::Session)
            .into_iter()
            .collect(),
        "turn.completed" => {
            let mut out: Vec<Progress> = usage(event).map(Progress::Usage).into_iter().collect();
            out.push(Progress::Finished {
                ok: true,
                summary: None,
            });
            out
        }
        "turn.failed" => {
            let mut out: Vec<Progress> = usage(event).map(Progress::Usage).into_iter().collect();
            out.push(Progress::Finished {
                ok: false,
                summary: event
                    .get("error")
                    .and_then(|e| text(e, "message"))
                    .map(|m| api_error(&m)),
            });
            out
        }
        "error" => text(event, "message")
            .map(|m| Progress::Error(api_error(&m)))
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// `usage` of a turn event: input_tokens counts the cached ones too, as OpenAI counts.
fn usage(event: &Value) -> Option<StepUsage> {
    let usage = event.get("usage")?;
    let found = StepUsage {
        input_tokens: count(usage, "/input_tokens"),
        cached_input_tokens: count(usage, "/cached_input_tokens"),
        output_tokens: count(usage, "/output_tokens"),
        reasoning_tokens: count(usage, "/reasoning_output_tokens"),
        cost_usd: None,
        duration_ms: None,
    };
    (!found.is_empty()).then_some(found)
}

#[cfg(test)]
mod tests {
    use contract::RuntimeMode;

    use super::super::{Endpoint, build_for, build_with, parse_line, settings};
    use super::*;

    #[test]
    fn argv_with_model_and_effort_and_the_prompt_on_stdin() {
        let built = build_for(&settings(RuntimeMode::Codex, Some("gpt-5.5"), Some("high")));
        assert_eq!(built.program.to_str(), Some("codex"));
        assert_eq!(
            built.args,
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-C",
                "/w/job/repo",
                "--sandbox",
                "danger-full-access",
                "-m",
                "gpt-5.5",
                "-c",
                "model_reasoning_effort=high",
                "-",
            ]
        );
        assert_eq!(built.stdin.as_deref(), Some("Fix the build"));
        // codex makes $HOME/.codex itself; a CODEX_HOME naming a missing folder stops it.
        assert!(built.env.iter().all(|(k, _)| k != "CODEX_HOME"));
        assert_eq!(built.env_remove, ["CODEX_HOME"]);
        assert_eq!(built.env_value("HOME"), Some("/w/job/home"));
        assert!(
            !built
                .args
                .iter()
                .any(|a| a == "--effort" || a == "--full-auto")
        );
    }

    #[test]
    fn argv_leaves_model_and_effort_to_the_cli_when_unset() {
        let built = build_for(&settings(RuntimeMode::Codex, None, None));
        assert!(!built.args.iter().any(|a| a == "-m" || a.contains("effort")));
        assert_eq!(built.args.last().map(String::as_str), Some("-"));
    }

    #[test]
    fn an_endpoint_sets_the_base_url_before_exec_and_the_key_codex_exec_reads() {
        let endpoint = Endpoint {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key: Some("sk-from-openai-api-key".into()),
            auth_type: None,
        };
        let built = build_with(&settings(RuntimeMode::Codex, None, None), &endpoint);
        assert_eq!(
            built.args[..3],
            ["-c", "openai_base_url=http://127.0.0.1:9/v1", "exec"]
        );
        assert_eq!(
            built.env_value("CODEX_API_KEY"),
            Some("sk-from-openai-api-key")
        );
    }

    #[test]
    fn jsonl_events_become_progress_with_the_turn_s_usage() {
        let lines = [
            r#"{"type":"thread.started","thread_id":"t1"}"#,
            r#"{"type":"item.completed","item":{"id":"i0","type":"error","message":"Falling back from WebSockets to HTTPS transport."}}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"Done."}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"command_execution","command":"cargo test"}}"#,
            r#"{"type":"error","message":"stream disconnected"}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":300,"cache_write_input_tokens":0,"output_tokens":45,"reasoning_output_tokens":12}}"#,
        ];
        let got: Vec<Progress> = lines
            .iter()
            .flat_map(|l| parse_line(RuntimeMode::Codex, l))
            .collect();
        assert_eq!(
            got,
            [
                Progress::Session("t1".into()),
                Progress::Error("Falling back from WebSockets to HTTPS transport.".into()),
                Progress::Message("Done.".into()),
                Progress::Action("ran cargo test".into()),
                Progress::Error("stream disconnected".into()),
                Progress::Usage(StepUsage {
                    input_tokens: Some(1200),
                    cached_input_tokens: Some(300),
                    output_tokens: Some(45),
                    reasoning_tokens: Some(12),
                    cost_usd: None,
                    duration_ms: None,
                }),
                Progress::Finished {
                    ok: true,
                    summary: None
                },
            ]
        );
    }

    #[test]
    fn a_failed_turn_says_the_api_s_own_message() {
        let failed = r#"{"type":"turn.failed","error":{"message":"{\"error\":{\"message\":\"The model `gpt-9` does not exist\",\"type\":\"invalid_request_error\"}}"}}"#;
        assert_eq!(
            parse_line(RuntimeMode::Codex, failed),
            [Progress::Finished {
                ok: false,
                summary: Some("The model `gpt-9` does not exist".into())
            }]
        );
        assert_eq!(
            parse_line(
                RuntimeMode::Codex,
                r#"{"type":"turn.failed","error":{"message":"quota"}}"#
            ),
            [Progress::Finished {
                ok: false,
                summary: Some("quota".into())
            }]
        );
    }
}
