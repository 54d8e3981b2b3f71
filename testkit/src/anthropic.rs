//! The Anthropic Messages API as claude speaks it: `POST /v1/messages`, streamed as
//! server-sent events (`message_start`, content blocks, `message_delta` with the stop
//! reason and output tokens, `message_stop`). Tool calls are `tool_use` blocks whose input
//! arrives as JSON pieces; their results come back as `tool_result` blocks.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::{Turn, Usage, pieces, sse};

pub(crate) fn has_tool_result(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|messages| {
        messages.iter().any(|m| {
            m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
        })
    })
}

pub(crate) fn answer(
    path: &str,
    body: &Value,
    turn: &Turn,
    usage: Usage,
    number: u64,
) -> Option<(Response, bool)> {
    if path.starts_with("/v1/messages/count_tokens") {
        return Some((
            Json(json!({ "input_tokens": usage.input })).into_response(),
            false,
        ));
    }
    let model = body["model"].as_str().unwrap_or("claude");
    let offers_bash = body["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == "Bash"));
    let offered = |wanted: &str| {
        let names = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str());
        crate::offered_tool(names, wanted).map(str::to_string)
    };
    let tool = match turn {
        Turn::Shell(command) if offers_bash => Some((
            "Bash".to_string(),
            json!({ "command": command, "description": "Run the scripted command" }),
        )),
        Turn::Tool { name, input } => offered(name).map(|name| (name, input.clone())),
        _ => None,
    };
    let (block, deltas, stop, text) = match tool {
        Some((name, input)) => {
            let input = input.to_string();
            let (a, b) = input.split_at(input.len() / 2);
            let deltas: Vec<Value> = [a, b]
                .iter()
                .map(|p| json!({ "type": "input_json_delta", "partial_json": p }))
                .collect();
            let block = json!({ "type": "tool_use", "id": format!("toolu_{number}"), "name": name, "input": {} });
            (block, deltas, "tool_use", None)
        }
        None => {
            let text = match turn {
                Turn::Reply(text) => text.clone(),
                Turn::Shell(_) => "The request offered no Bash tool.".into(),
                Turn::Tool { name, .. } => format!("The request offered no tool {name}."),
            };
            let deltas = pieces(&text)
                .into_iter()
                .map(|p| json!({ "type": "text_delta", "text": p }))
                .collect();
            (
                json!({ "type": "text", "text": "" }),
                deltas,
                "end_turn",
                Some(text),
            )
        }
    };
    let id = format!("msg_{number}");
    // Anthropic counts cache reads apart from input_tokens.
    let start_usage = json!({
        "input_tokens": usage.input - usage.cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached,
        "output_tokens": 1,
    });
    if body["stream"] != true {
        let content = match &text {
            Some(text) => json!([{ "type": "text", "text": text }]),
            None => json!([block]),
        };
        let mut full = start_usage.clone();
        full["output_tokens"] = json!(usage.output);
        let message = json!({ "id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null, "usage": full });
        return Some((Json(message).into_response(), true));
    }
    let mut events = vec![
        (
            Some("message_start"),
            json!({ "type": "message_start", "message": { "id": id, "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": start_usage } }),
        ),
        (
            Some("content_block_start"),
            json!({ "type": "content_block_start", "index": 0, "content_block": block }),
        ),
    ];
    for delta in deltas {
        events.push((
            Some("content_block_delta"),
            json!({ "type": "content_block_delta", "index": 0, "delta": delta }),
        ));
    }
    events.push((
        Some("content_block_stop"),
        json!({ "type": "content_block_stop", "index": 0 }),
    ));
    events.push((
        Some("message_delta"),
        json!({ "type": "message_delta", "delta": { "stop_reason": stop, "stop_sequence": null },
            "usage": { "output_tokens": usage.output } }),
    ));
    events.push((Some("message_stop"), json!({ "type": "message_stop" })));
    Some((sse(&events), true))
}
