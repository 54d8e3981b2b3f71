//! `claude -p`: print mode, the prompt on stdin (no prompt argument), in the process's
//! working directory (it has no directory flag). `--output-format stream-json` needs
//! `--verbose`. Bypassing permissions is refused when running as root unless
//! `IS_SANDBOX=1` is set; the job's workspace is the sandbox, so the worker always sets it.
//! `CLAUDE_CODE_EFFORT_LEVEL` wins over `--effort`, and `CLAUDE_CONFIG_DIR` would move its
//! config out of the job's HOME, so neither reaches it from the worker's environment.

use contract::StepUsage;
use serde_json::Value;

use super::{Invocation, Progress, SessionArg, StepRun, count, text};

/// `~/.claude/projects/<the cwd, "/" as "-">/<id>.jsonl`; found by id, whatever the cwd
/// was, since claude continues a session by id from any.
pub(super) fn session_file(home: &std::path::Path, id: &str) -> Option<std::path::PathBuf> {
    let name = format!("{id}.jsonl");
    super::session::largest(&home.join(".claude/projects"), 1, &|n| n == name)
}

pub(super) fn build(run: &StepRun<'_>, invocation: &mut Invocation) {
    let mut args: Vec<String> = vec!["-p".into()];
    if let Some(model) = &run.runtime.model {
        args.extend(["--model".into(), model.clone()]);
    }
    if let Some(effort) = &run.runtime.effort {
        args.extend(["--effort".into(), effort.clone()]);
    }
    // The id is a flag's value, never the last argument: a prompt argument would be.
    match run.session {
        SessionArg::Begin(Some(id)) => args.extend(["--session-id".into(), id.clone()]),
        SessionArg::Begin(None) => {}
        SessionArg::Continue(id) => args.extend(["--resume".into(), id.clone()]),
    }
    args.extend([
        "--permission-mode".into(),
        "bypassPermissions".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
    ]);
    invocation.args = args;
    invocation.env_remove.extend([
        "CLAUDE_CODE_EFFORT_LEVEL".into(),
        "CLAUDE_CONFIG_DIR".into(),
    ]);
    invocation.env.push(("IS_SANDBOX".into(), "1".into()));
    if let Some(url) = &run.endpoint.base_url {
        invocation
            .env
            .push(("ANTHROPIC_BASE_URL".into(), url.clone()));
    }
    if let Some(key) = &run.endpoint.api_key {
        invocation
            .env
            .push(("ANTHROPIC_API_KEY".into(), key.clone()));
    }
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
        "system" if event.get("subtype").and_then(Value::as_str) == Some("init") => {
            text(event, "session_id")
                .map(Progress::Session)
                .into_iter()
                .collect()
        }
        "system" if event.get("subtype").and_then(Value::as_str) == Some("api_retry") => {
            let attempt = count(event, "/attempt").unwrap_or(0);
            let max = count(event, "/max_retries").unwrap_or(0);
            let why = text(event, "error").unwrap_or_else(|| "unknown".into());
            let status = count(event, "/error_status")
                .map(|s| format!(" (HTTP {s})"))
                .unwrap_or_default();
            vec![Progress::Error(format!(
                "API request failed{status}: {why}; retry {attempt} of {max}"
            ))]
        }
        // The subtype alone can say success while is_error says otherwise (an API error
        // reported as a result); both must agree. An error result carries `errors[]` and
        // no `result`.
        "result" => {
            let ok = event.get("subtype").and_then(Value::as_str) == Some("success")
                && event.get("is_error").and_then(Value::as_bool) == Some(false);
            let errors: Vec<&str> = event
                .get("errors")
                .and_then(Value::as_array)
                .map(|e| e.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let summary =
                text(event, "result").or_else(|| (!errors.is_empty()).then(|| errors.join("; ")));
            let mut out: Vec<Progress> = usage(event).map(Progress::Usage).into_iter().collect();
            out.push(Progress::Finished { ok, summary });
            out
        }
        _ => Vec::new(),
    }
}

/// The final result's figures: `modelUsage` covers every model the run used (a helper
/// model's requests too), `usage` only adds up the main one's, and messages repeat theirs.
/// Anthropic counts cache reads and writes apart from `input_tokens`; here they are input.
fn usage(event: &Value) -> Option<StepUsage> {
    let cost_usd = event.get("total_cost_usd").and_then(Value::as_f64);
    let per_model = event
        .get("modelUsage")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty());
    let found = match per_model {
        Some(models) => models.values().fold(StepUsage::default(), |sum, m| {
            let read = count(m, "/cacheReadInputTokens");
            let input = [
                count(m, "/inputTokens"),
                read,
                count(m, "/cacheCreationInputTokens"),
            ];
            sum + StepUsage {
                input_tokens: input.iter().flatten().copied().reduce(|a, b| a + b),
                cached_input_tokens: read,
                output_tokens: count(m, "/outputTokens"),
                reasoning_tokens: count(m, "/thinkingTokens"),
                cost_usd: None,
                duration_ms: None,
            }
        }),
        None => {
            let none = Value::Null;
            let u = event.get("usage").unwrap_or(&none);
            let read = count(u, "/cache_read_input_tokens");
            let input = [
                count(u, "/input_tokens"),
                read,
                count(u, "/cache_creation_input_tokens"),
            ];
            StepUsage {
                input_tokens: input.iter().flatten().copied().reduce(|a, b| a + b),
                cached_input_tokens: read,
                output_tokens: count(u, "/output_tokens"),
                reasoning_tokens: count(u, "/output_tokens_details/thinking_tokens"),
                cost_usd: None,
                duration_ms: None,
            }
        }
    };
    let found = StepUsage { cost_usd, ..found };
    (!found.is_empty()).then_some(found)
}

#[cfg(test)]
mod tests {
    use contract::RuntimeMode;

    use super::super::{Endpoint, build_for, build_with, parse_line, settings};
    use super::*;

    #[test]
    fn argv_with_model_and_effort() {
        let built = build_for(&settings(RuntimeMode::Claude, Some("opus"), Some("xhigh")));
        assert_eq!(built.program.to_str(), Some("claude"));
        assert_eq!(
            built.args,
            [
                "-p",
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
        assert_eq!(built.stdin.as_deref(), Some("Fix the build"));
        assert!(built.env.contains(&("IS_SANDBOX".into(), "1".into())));
        // The variable would win over --effort.
        assert!(
            built
                .env_remove
                .iter()
                .any(|v| v == "CLAUDE_CODE_EFFORT_LEVEL")
        );
    }

    #[test]
    fn an_endpoint_reaches_claude_through_its_variables() {
        let endpoint = Endpoint {
            base_url: Some("http://127.0.0.1:9".into()),
            api_key: Some("sk-ant-example-key-0000".into()),
            auth_type: None,
        };
        let built = build_with(&settings(RuntimeMode::Claude, None, None), &endpoint);
        assert_eq!(
            built.env_value("ANTHROPIC_BASE_URL"),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(
            built.env_value("ANTHROPIC_API_KEY"),
            Some("sk-ant-example-key-0000")
        );
        assert!(!built.args.iter().any(|a| a.contains("sk-ant")));
    }

    #[test]
    fn an_error_result_says_its_errors_and_a_retry_is_reported() {
        let failed = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["API Error: 529 overloaded","gave up"],"total_cost_usd":0.01}"#;
        assert_eq!(
            parse_line(RuntimeMode::Claude, failed),
            [
                Progress::Usage(StepUsage {
                    cost_usd: Some(0.01),
                    ..StepUsage::default()
                }),
                Progress::Finished {
                    ok: false,
                    summary: Some("API Error: 529 overloaded; gave up".into())
                }
            ]
        );
        let retry = r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1200,"error_status":529,"error":"overloaded_error"}"#;
        assert_eq!(
            parse_line(RuntimeMode::Claude, retry),
            [Progress::Error(
                "API request failed (HTTP 529): overloaded_error; retry 2 of 10".into()
            )]
        );
    }

    #[test]
    fn the_final_result_gives_tokens_of_every_model_and_the_price() {
        let result = r#"{"type":"result","subtype":"success","is_error":false,"result":"Done","total_cost_usd":0.0123,
            "usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":40},
            "modelUsage":{
              "claude-opus-5-5":{"inputTokens":10,"outputTokens":40,"cacheReadInputTokens":100,"cacheCreationInputTokens":5,"thinkingTokens":7,"costUSD":0.012},
              "claude-haiku-5":{"inputTokens":3,"outputTokens":2,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":0.0003}}}"#
            .replace('\n', "");
        let got = parse_line(RuntimeMode::Claude, &result);
        assert_eq!(
            got[0],
            Progress::Usage(StepUsage {
                input_tokens: Some(118),
                cached_input_tokens: Some(100),
                output_tokens: Some(42),
                reasoning_tokens: Some(7),
                cost_usd: Some(0.0123),
                duration_ms: None,
            })
        );
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
