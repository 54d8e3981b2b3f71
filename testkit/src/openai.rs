//! The OpenAI Responses API as codex speaks it: `POST /v1/responses`, streamed as
//! server-sent events (`response.created` … `response.completed` with usage). Tool calls
//! are `function_call` output items (the shell, or an MCP tool codex offers as a function);
//! their results come back as `function_call_output`.

use axum::response::Response;
use serde_json::{Value, json};

use crate::{Turn, Usage, pieces, sse};

pub(crate) fn has_tool_result(body: &Value) -> bool {
    body["input"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["type"] == "function_call_output"))
}

fn offers(body: &Value, tool: &str) -> bool {
    body["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == tool))
}

/// The offered function tool that `wanted` names (an MCP tool, which codex offers under a
/// name of its own making, inside a `namespace` tool of the server's): its name, and its
/// namespace if it is in one.
fn offered(body: &Value, wanted: &str) -> Option<(String, Option<String>)> {
    let tools = body["tools"].as_array().into_iter().flatten();
    let mut candidates = Vec::new();
    for tool in tools {
        match tool["type"].as_str() {
            Some("namespace") => {
                let namespace = tool["name"].as_str().map(str::to_string);
                for inner in tool["tools"].as_array().into_iter().flatten() {
                    if let Some(name) = inner["name"].as_str() {
                        candidates.push((name.to_string(), namespace.clone()));
                    }
                }
            }
            _ => {
                if let Some(name) = tool["name"].as_str() {
                    candidates.push((name.to_string(), None));
                }
            }
        }
    }
    let name = crate::offered_tool(candidates.iter().map(|(n, _)| n.as_str()), wanted)?;
    candidates.iter().find(|(n, _)| n == name).cloned()
}

pub(crate) fn answer(
    body: &Value,
    turn: &Turn,
    usage: Usage,
    number: u64,
) -> Option<(Response, bool)> {
    let id = format!("resp_{number}");
    let mut events = vec![(
        Some("response.created"),
        json!({ "type": "response.created", "response": { "id": id, "status": "in_progress", "output": [] } }),
    )];
    let item = match turn {
        Turn::Shell(command) if offers(body, "exec_command") => Some(json!({
            "type": "function_call", "id": format!("fc_{number}"), "call_id": format!("call_{number}"),
            "name": "exec_command", "arguments": json!({ "cmd": command }).to_string(), "status": "completed",
        })),
        Turn::Shell(command) if offers(body, "shell") => Some(json!({
            "type": "function_call", "id": format!("fc_{number}"), "call_id": format!("call_{number}"),
            "name": "shell", "arguments": json!({ "command": ["bash", "-lc", command] }).to_string(),
            "status": "completed",
        })),
        Turn::Tool { name, input } => offered(body, name).map(|(name, namespace)| {
            let mut call = json!({
                "type": "function_call", "id": format!("fc_{number}"), "call_id": format!("call_{number}"),
                "name": name, "arguments": input.to_string(), "status": "completed",
            });
            if let Some(namespace) = namespace {
                call["namespace"] = json!(namespace);
            }
            call
        }),
        _ => None,
    };
    let item = match item {
        Some(call) => call,
        None => {
            let text = match turn {
                Turn::Reply(text) => text.clone(),
                Turn::Shell(_) => "The request offered no shell tool I know.".into(),
                Turn::Tool { name, .. } => format!("The request offered no tool {name}."),
            };
            let msg = format!("msg_{number}");
            events.push((
                Some("response.output_item.added"),
                json!({ "type": "response.output_item.added", "output_index": 0, "item": {
                    "type": "message", "id": msg, "role": "assistant", "status": "in_progress", "content": [] } }),
            ));
            for piece in pieces(&text) {
                events.push((
                    Some("response.output_text.delta"),
                    json!({ "type": "response.output_text.delta", "item_id": msg, "output_index": 0,
                        "content_index": 0, "delta": piece }),
                ));
            }
            json!({ "type": "message", "id": msg, "role": "assistant", "status": "completed",
                "content": [{ "type": "output_text", "text": text, "annotations": [] }] })
        }
    };
    events.push((
        Some("response.output_item.done"),
        json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
    ));
    events.push((
        Some("response.completed"),
        json!({ "type": "response.completed", "response": {
            "id": id, "status": "completed", "output": [item],
            "usage": {
                "input_tokens": usage.input,
                "input_tokens_details": { "cached_tokens": usage.cached },
                "output_tokens": usage.output,
                "output_tokens_details": { "reasoning_tokens": usage.reasoning },
                "total_tokens": usage.input + usage.output,
            },
        } }),
    ));
    Some((sse(&events), true))
}
