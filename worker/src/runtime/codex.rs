//! `codex exec`: the prompt as the last argument, `--json` for JSONL events. exec already
//! never asks for approval; `--sandbox workspace-write` lets it edit the checkout only.
//! It reads its API key from `CODEX_API_KEY` and its config from `CODEX_HOME`, which is
//! kept inside the job's HOME. Offline it waits for the network forever, so the worker's
//! own timeout is what ends it.

use serde_json::Value;

use super::{Invocation, Progress, StepRun, text};

pub(super) fn build(run: &StepRun<'_>, invocation: &mut Invocation) {
    let mut args: Vec<String> = vec![
        "exec".into(),
        "--json".into(),
        // The worker checks the repository out itself; this only spares a refusal when
        // a task runs outside one.
        "--skip-git-repo-check".into(),
        "-C".into(),
        run.repo.display().to_string(),
        "--sandbox".into(),
        "workspace-write".into(),
    ];
    if let Some(model) = &run.runtime.model {
        args.extend(["-m".into(), model.clone()]);
    }
    if let Some(effort) = &run.runtime.effort {
        // There is no --effort flag (exit 2): effort is a config override.
        args.extend(["-c".into(), format!("model_reasoning_effort={effort}")]);
    }
    args.push(run.prompt.to_string());
    invocation.args = args;
    invocation.env.push((
        "CODEX_HOME".into(),
        run.home.join(".codex").display().to_string(),
    ));
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
                _ => Vec::new(),
            }
        }
        "turn.completed" => vec![Progress::Finished {
            ok: true,
            summary: None,
        }],
        "turn.failed" => vec![Progress::Finished {
            ok: false,
            summary: event.get("error").and_then(|e| text(e, "message")),
        }],
        "error" => text(event, "message")
            .map(Progress::Error)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use contract::RuntimeMode;

    use super::super::{build_for, parse_line, settings};
    use super::*;

    #[test]
    fn argv_with_model_and_effort() {
        let built = build_for(&settings(
            RuntimeMode::Codex,
            Some("gpt-5-codex"),
            Some("high"),
        ));
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
                "workspace-write",
                "-m",
                "gpt-5-codex",
                "-c",
                "model_reasoning_effort=high",
                "Fix the build",
            ]
        );
        assert!(
            built
                .env
                .contains(&("CODEX_HOME".into(), "/w/job/home/.codex".into()))
        );
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
        assert!(!built.args.iter().any(|a| a == "-m" || a == "-c"));
        assert_eq!(built.args.last().map(String::as_str), Some("Fix the build"));
    }

    #[test]
    fn jsonl_events_become_progress() {
        let lines = [
            r#"{"type":"thread.started","thread_id":"t1"}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"Done."}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"command_execution","command":"cargo test"}}"#,
            r#"{"type":"error","message":"stream disconnected"}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1}}"#,
        ];
        let got: Vec<Progress> = lines
            .iter()
            .flat_map(|l| parse_line(RuntimeMode::Codex, l))
            .collect();
        assert_eq!(
            got,
            [
                Progress::Message("Done.".into()),
                Progress::Action("ran cargo test".into()),
                Progress::Error("stream disconnected".into()),
                Progress::Finished {
                    ok: true,
                    summary: None
                },
            ]
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
