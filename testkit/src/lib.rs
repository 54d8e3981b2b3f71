//! A scripted model server for tests: it speaks enough of the OpenAI Responses API (codex),
//! the Anthropic Messages API (claude) and the Gemini API (gemini) to drive the real agent
//! CLIs through a step, offline, and records every request for assertions.
//!
//! The script is in the prompt. Lines of it that start with `@model ` are directives:
//!
//!   @model shell COMMAND   the first turn answers with a call of the CLI's shell tool
//!                          (codex `exec_command`, claude `Bash`, gemini
//!                          `run_shell_command`) running COMMAND in the workspace
//!   @model tool NAME JSON  the first turn answers with a call of the offered tool whose
//!                          name ends with NAME (an MCP tool, which the CLI renames with
//!                          its own prefix and may spell with `_` for `.`), with the
//!                          arguments JSON; claude and codex
//!   @model reply TEXT      the final message, once the tool result is back (or at once
//!                          with no `shell` or `tool`), streamed in several pieces
//!
//! Every answer reports token usage ([`Usage`]), distinct per request, and the request's
//! record keeps what was reported, so a test can hold a CLI's totals against it.

mod anthropic;
mod gemini;
pub mod github;
mod openai;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Which API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
    Gemini,
    Unknown,
}

/// Tokens one answer reported, in one convention for all three APIs: `input` counts every
/// input token, `cached` how many of them came from a cache; `reasoning` is part of
/// `output`. Each API is sent them in its own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: u64,
    pub cached: u64,
    pub output: u64,
    pub reasoning: u64,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub api: Api,
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers, with credentials cut to their last four characters (`…abcd`).
    pub headers: Vec<(String, String)>,
    /// The JSON body (`null` when there was none or it was not JSON).
    pub body: Value,
    /// The step this request belongs to, from the prompt's `STEP i/n` header, if any.
    pub step: Option<String>,
    /// What the answer reported, when it was a model turn.
    pub usage: Option<Usage>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    requests: Vec<Recorded>,
}

/// The running server; it stops when dropped.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelServer {
    /// Listens on a free port of 127.0.0.1.
    pub async fn start() -> ModelServer {
        let state = Arc::new(Mutex::new(State::default()));
        let app = Router::new().fallback({
            let state = state.clone();
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move { answer(&state, method, uri, headers, body) }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("a bound address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ModelServer { addr, state, task }
    }

    /// `http://127.0.0.1:PORT`; codex wants `{url}/v1`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().expect("not poisoned").requests.clone()
    }

    /// The model turns (requests that were answered with usage) of step `i/n`.
    pub fn turns_of(&self, step: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.usage.is_some() && r.step.as_deref() == Some(step))
            .collect()
    }
}

/// What the script asks of one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Call the shell tool with this command.
    Shell(String),
    /// Call the offered tool whose name ends with `name`, with `input`.
    Tool { name: String, input: Value },
    /// The final message.
    Reply(String),
}

fn answer(
    state: &Mutex<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.to_string());
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let api = if path.starts_with("/v1/responses") {
        Api::OpenAi
    } else if path.starts_with("/v1/messages") {
        Api::Anthropic
    } else if path.contains("/models/") && path.contains(':') {
        Api::Gemini
    } else {
        Api::Unknown
    };
    let mut recorded = Recorded {
        api,
        method: method.to_string(),
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), shown(k.as_str(), v.to_str().unwrap_or("?"))))
            .collect(),
        step: step_of(&current(&body, api)),
        usage: None,
        body,
    };
    // codex tries a WebSocket first; 426 makes it use HTTP at once (a 404 costs retries).
    let response = if headers.contains_key(header::UPGRADE) {
        StatusCode::UPGRADE_REQUIRED.into_response()
    } else {
        let number = state.lock().expect("not poisoned").requests.len() as u64;
        let usage = usage_for(number);
        let turn = turn(&current(&recorded.body, api), api);
        let answered = match api {
            Api::OpenAi => openai::answer(&recorded.body, &turn, usage, number),
            Api::Anthropic => {
                anthropic::answer(&recorded.path, &recorded.body, &turn, usage, number)
            }
            Api::Gemini => gemini::answer(&recorded.path, &recorded.body, &turn, usage),
            Api::Unknown => None,
        };
        match answered {
            Some((response, counted)) => {
                recorded.usage = counted.then_some(usage);
                response
            }
            None => (StatusCode::NOT_FOUND, "no such model endpoint").into_response(),
        }
    };
    state.lock().expect("not poisoned").requests.push(recorded);
    response
}

/// The conversation's key in each API's request body.
fn conversation_key(api: Api) -> Option<&'static str> {
    match api {
        Api::OpenAi => Some("input"),
        Api::Anthropic => Some("messages"),
        Api::Gemini => Some("contents"),
        Api::Unknown => None,
    }
}

/// What of a request the script reads, as a model reads its latest turn: the body with
/// its conversation cut to start at the latest item that holds a prompt (the task's, or a
/// line of script). A continued session sends the earlier prompts, tool calls and replies
/// first, and their script is done with. The body as it is when no item holds one.
fn current(body: &Value, api: Api) -> Value {
    let Some(key) = conversation_key(api) else {
        return body.clone();
    };
    let Some(items) = body[key].as_array() else {
        return body.clone();
    };
    let holds_prompt = |item: &Value| {
        let mut all = Vec::new();
        strings(item, &mut all);
        all.iter().any(|s| {
            s.contains("MOONMIND TASK OBJECTIVE")
                || s.lines().any(|l| l.trim_start().starts_with("@model "))
        })
    };
    let Some(at) = items.iter().rposition(holds_prompt) else {
        return body.clone();
    };
    let mut cut = body.clone();
    cut[key] = Value::Array(items[at..].to_vec());
    cut
}

/// Credentials are cut to their last four characters: enough to tell keys apart.
fn shown(name: &str, value: &str) -> String {
    let secret = ["authorization", "x-api-key", "x-goog-api-key", "api-key"]
        .contains(&name.to_ascii_lowercase().as_str());
    if !secret {
        return value.to_string();
    }
    let tail: String = value
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("…{tail}")
}

/// Distinct figures for each answer, so a total shows which answers it added up.
fn usage_for(number: u64) -> Usage {
    Usage {
        input: 1000 + 10 * number,
        cached: 200 + number,
        output: 40 + number,
        reasoning: 7,
    }
}

/// Every string in a request body, depth first: where a test looks for the prompt.
pub fn texts(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    strings(value, &mut out);
    out
}

/// Every string in `value`, depth first.
pub(crate) fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

fn step_of(body: &Value) -> Option<String> {
    let mut all = Vec::new();
    strings(body, &mut all);
    all.iter().find_map(|s| {
        let at = s.find("STEP ")?;
        let rest = &s[at + 5..];
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '/'))?;
        let step = &rest[..end];
        step.contains('/').then(|| step.to_string())
    })
}

/// The turn the script asks for: the shell call until a tool result is back, then the
/// reply.
fn turn(body: &Value, api: Api) -> Turn {
    let mut all = Vec::new();
    strings(body, &mut all);
    let directive = |verb: &str| {
        all.iter().flat_map(|s| s.lines()).find_map(|line| {
            line.trim_start()
                .strip_prefix("@model ")
                .and_then(|rest| rest.strip_prefix(verb))
                .map(|rest| rest.trim().to_string())
        })
    };
    let answered = match api {
        Api::OpenAi => openai::has_tool_result(body),
        Api::Anthropic => anthropic::has_tool_result(body),
        Api::Gemini => gemini::has_tool_result(body),
        Api::Unknown => false,
    };
    if !answered {
        if let Some(command) = directive("shell ") {
            return Turn::Shell(command);
        }
        if let Some((name, input)) = directive("tool ")
            .as_deref()
            .and_then(|t| t.split_once(' '))
        {
            return Turn::Tool {
                name: name.to_string(),
                input: serde_json::from_str(input).unwrap_or(Value::Null),
            };
        }
    }
    Turn::Reply(directive("reply ").unwrap_or_else(|| "Done.".into()))
}

/// The name of the tool in `offered` that `wanted` names: the one ending with it, where
/// any character but a letter or a digit matches any other such (CLIs spell an MCP tool
/// `mcp__server__queue_enqueue` or keep its dots).
pub(crate) fn offered_tool<'a>(
    offered: impl IntoIterator<Item = &'a str>,
    wanted: &str,
) -> Option<&'a str> {
    let plain = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect()
    };
    let wanted = plain(wanted);
    offered
        .into_iter()
        .find(|name| plain(name).ends_with(&wanted))
}

/// `text` cut in about three pieces at spaces, each piece keeping its spaces, so the
/// pieces read right only when joined as they are.
pub(crate) fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let size = words.len().div_ceil(3).max(1);
    let mut out: Vec<String> = words.chunks(size).map(|c| c.concat()).collect();
    // A last piece of its own for the closing mark, as models send it.
    if let Some(last) = out.last_mut()
        && last.len() > 1
        && last.ends_with(['.', '!'])
    {
        let mark = last.pop().map(String::from).unwrap_or_default();
        out.push(mark);
    }
    out
}

/// A `text/event-stream` response of `events` (`event:` names optional).
pub(crate) fn sse(events: &[(Option<&str>, Value)]) -> Response {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            body.push_str(&format!("event: {name}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pieces_join_back_into_the_text() {
        let text = "Appended a line to notes.txt as asked.";
        let got = pieces(text);
        assert!(got.len() >= 3, "{got:?}");
        assert_eq!(got.concat(), text);
        assert_eq!(got.last().map(String::as_str), Some("."));
    }

    #[test]
    fn a_continued_session_is_scripted_by_its_latest_prompt_alone() {
        let user =
            |text: &str| json!({ "role": "user", "content": [{ "type": "text", "text": text }] });
        let body = json!({ "messages": [
            user("MOONMIND TASK OBJECTIVE:\nx\n\nSTEP 1/2 step-1:\n@model shell echo one\n@model reply First."),
            { "role": "assistant", "content": [{ "type": "tool_use", "id": "t", "name": "Bash", "input": {} }] },
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t", "content": "" }] },
            { "role": "assistant", "content": [{ "type": "text", "text": "First." }] },
            user("MOONMIND TASK OBJECTIVE:\nx\n\nSTEP 2/2 step-2:\n@model shell echo two\n@model reply Second."),
        ] });
        let now = current(&body, Api::Anthropic);
        assert_eq!(step_of(&now).as_deref(), Some("2/2"));
        assert_eq!(turn(&now, Api::Anthropic), Turn::Shell("echo two".into()));
        // The whole body when no item holds a prompt.
        let plain = json!({ "messages": [user("hello")] });
        assert_eq!(current(&plain, Api::Anthropic), plain);
    }

    #[test]
    fn the_script_asks_for_the_shell_until_a_result_is_back() {
        let prompt = json!({ "input": [{ "role": "user", "content": [{ "type": "input_text",
            "text": "MOONMIND TASK OBJECTIVE:\nx\n\nSTEP 2/3 step-2:\n@model shell echo hi >> a.txt\n@model reply All done." }] }] });
        assert_eq!(
            turn(&prompt, Api::OpenAi),
            Turn::Shell("echo hi >> a.txt".into())
        );
        assert_eq!(step_of(&prompt).as_deref(), Some("2/3"));
        let mut after = prompt.clone();
        after["input"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "type": "function_call_output", "call_id": "c", "output": "ok" }));
        assert_eq!(turn(&after, Api::OpenAi), Turn::Reply("All done.".into()));
    }

    #[test]
    fn credentials_are_kept_only_by_their_end() {
        assert_eq!(shown("Authorization", "Bearer sk-test-1234"), "…1234");
        assert_eq!(
            shown("content-type", "application/json"),
            "application/json"
        );
    }
}
