//! The Gemini API as gemini speaks it: `POST /v1beta/models/{model}:streamGenerateContent
//! ?alt=sse` (chunks as `data:` lines, the last with `finishReason` and `usageMetadata`),
//! `:generateContent` for its own helper calls (a router that wants JSON of a given
//! schema), and `:countTokens`. Tool calls are `functionCall` parts; their results come
//! back as `functionResponse` parts.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::{Turn, Usage, pieces, sse};

pub(crate) fn has_tool_result(body: &Value) -> bool {
    body["contents"].as_array().is_some_and(|contents| {
        contents.iter().any(|c| {
            c["parts"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()))
        })
    })
}

fn usage_metadata(usage: Usage) -> Value {
    json!({
        "promptTokenCount": usage.input,
        "cachedContentTokenCount": usage.cached,
        "candidatesTokenCount": usage.output - usage.reasoning,
        "thoughtsTokenCount": usage.reasoning,
        "totalTokenCount": usage.input + usage.output,
    })
}

pub(crate) fn answer(
    path: &str,
    body: &Value,
    turn: &Turn,
    usage: Usage,
) -> Option<(Response, bool)> {
    let model = path
        .split("/models/")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or("gemini");
    if path.contains(":countTokens") {
        return Some((
            Json(json!({ "totalTokens": usage.input })).into_response(),
            false,
        ));
    }
    if path.contains(":generateContent") {
        // A helper call: answer in the JSON shape it asks for, else with plain text.
        let schema = &body["generationConfig"]["responseJsonSchema"];
        let text = if schema.is_object() {
            example(schema).to_string()
        } else {
            "ok".to_string()
        };
        let answer = json!({
            "candidates": [{ "content": { "role": "model", "parts": [{ "text": text }] },
                "finishReason": "STOP", "index": 0 }],
            "usageMetadata": usage_metadata(usage),
            "modelVersion": model,
        });
        return Some((Json(answer).into_response(), true));
    }
    if !path.contains(":streamGenerateContent") {
        return None;
    }
    let offers_shell = body["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|t| {
            t["functionDeclarations"]
                .as_array()
                .is_some_and(|d| d.iter().any(|f| f["name"] == "run_shell_command"))
        })
    });
    let chunk = |parts: Value, last: bool| {
        let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
        let mut chunk = json!({ "modelVersion": model });
        if last {
            candidate["finishReason"] = json!("STOP");
            chunk["usageMetadata"] = usage_metadata(usage);
        }
        chunk["candidates"] = json!([candidate]);
        (None, chunk)
    };
    let events = match turn {
        Turn::Shell(command) if offers_shell => vec![chunk(
            json!([{ "functionCall": { "name": "run_shell_command",
                "args": { "command": command, "description": "Run the scripted command" } } }]),
            true,
        )],
        _ => {
            let text = match turn {
                Turn::Reply(text) => text.clone(),
                Turn::Shell(_) => "The request offered no run_shell_command tool.".into(),
                Turn::Tool { name, .. } => {
                    format!("This server cannot call {name} over this API yet.")
                }
            };
            let parts = pieces(&text);
            let count = parts.len();
            parts
                .into_iter()
                .enumerate()
                .map(|(i, p)| chunk(json!([{ "text": p }]), i + 1 == count))
                .collect()
        }
    };
    Some((sse(&events), true))
}

/// A value of the (Gemini-flavoured, upper-case types) JSON schema: every property filled.
fn example(schema: &Value) -> Value {
    let kind = schema["type"]
        .as_str()
        .unwrap_or("STRING")
        .to_ascii_uppercase();
    match kind.as_str() {
        "OBJECT" => {
            let mut object = Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for (name, property) in properties {
                    object.insert(name.clone(), example(property));
                }
            }
            Value::Object(object)
        }
        "ARRAY" => json!([example(&schema["items"])]),
        "INTEGER" | "NUMBER" => match schema["enum"].as_array().and_then(|e| e.first()) {
            Some(first) => first.clone(),
            None => json!(10),
        },
        "BOOLEAN" => json!(false),
        _ => match schema["enum"].as_array().and_then(|e| e.first()) {
            Some(first) => first.clone(),
            None => json!("simple"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_call_gets_json_of_its_schema() {
        let schema = json!({ "type": "OBJECT", "properties": {
            "complexity_reasoning": { "type": "STRING" },
            "complexity_score": { "type": "INTEGER" },
            "next_speaker": { "type": "STRING", "enum": ["user", "model"] } } });
        assert_eq!(
            example(&schema),
            json!({ "complexity_reasoning": "simple", "complexity_score": 10, "next_speaker": "user" })
        );
    }
}
