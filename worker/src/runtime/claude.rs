//! `claude -p`: print mode, the prompt as its argument, in the process's working directory
//! (it has no directory flag). `--output-format stream-json` needs `--verbose`. Bypassing
//! permissions is refused when running as root unless `IS_SANDBOX=1` is set; the job's
//! workspace is the sandbox, so the worker always sets it.

use serde_json::Value;

use super::{Invocation, Progress, StepRun, text};

pub(super) fn build(run: &StepRun<'_>, invocation: &mut Invocation) {
    let mut args: Vec<String> = vec!["-p".into(), run.prompt.to_string()];
    if let Some(model) = &run.runtime.model {
        args.extend(["--model".into(), model.clone()]);
    }
    if let Some(effort) = &run.runtime.effort {
        args.extend(["--effort".into(), effort.clone()]);
    }
    args.extend([
        "--permission-mode".into(),
        "bypassPermissions".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
    ]);
    invocation.args = args;
    invocation.env.push(("IS_SANDBOX".into(), "1".into()));
}

pub(super) fn parse(event: &Value) -> Vec<Progress> {
    match event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "assistant" => event
            .pointer("/message/content")
            .and_then(Value::as_array)
            .map(|content| {
                content
                    .iter()
                    .filter_map(|part| {
                        match part.get("type").and_then(Value::as_str).unwrap_or_default() {
                            "text" => text(part, "text").map(Progress::Message),
                            "tool_use" => text(part, "name").map(Progress::Action),
                            _ => None,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default(),
        // The subtype alone can say success while is_error says otherwise (an API error
        // reported as a result); both must agree.
        "result" => vec![Progress::Finished {
            ok: event.get("subtype").and_then(Value::as_str) == Some("success")
                && event.get("is_error").and_then(Value::as_bool) == Some(false),
            summary: text(event, "result"),
        }],
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
        let built = build_for(&settings(RuntimeMode::Claude, Some("opus"), Some("xhigh")));
        assert_eq!(built.program.to_str(), Some("claude"));
        assert_eq!(
            built.args,
            [
                "-p",
                "Fix the build",
                "--model",
                "opus",
                "--effort",
                "xhigh",
                "--permission-mode",
                "bypassPermissions",
                "--output-format",
                "stream-json",
                "--verbose",
            ]
        );
        assert_eq!(built.cwd.to_str(), Some("/w/job/repo"));
        assert!(built.env.contains(&("IS_SANDBOX".into(), "1".into())));
    }

    #[test]
    fn argv_without_model_or_effort() {
        let built = build_for(&settings(RuntimeMode::Claude, None, None));
        assert!(!built.args.iter().any(|a| a == "--model" || a == "--effort"));
        assert!(built.args.iter().any(|a| a == "--verbose"));
    }

    #[test]
    fn stream_json_becomes_progress_and_the_verdict_needs_both_fields() {
        let message = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Editing."},{"type":"tool_use","name":"Edit","input":{}}]}}"#;
        assert_eq!(
            parse_line(RuntimeMode::Claude, message),
            [
                Progress::Message("Editing.".into()),
                Progress::Action("Edit".into())
            ]
        );
        let ok = r#"{"type":"result","subtype":"success","is_error":false,"result":"All done"}"#;
        assert_eq!(
            parse_line(RuntimeMode::Claude, ok),
            [Progress::Finished {
                ok: true,
                summary: Some("All done".into())
            }]
        );
        let api_error =
            r#"{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key"}"#;
        assert_eq!(
            parse_line(RuntimeMode::Claude, api_error),
            [Progress::Finished {
                ok: false,
                summary: Some("Invalid API key".into())
            }]
        );
        assert!(
            parse_line(RuntimeMode::Claude, r#"{"type":"system","subtype":"init"}"#).is_empty()
        );
    }
}
