use std::fmt::Write as _;

use contract::FieldError;
use reqwest::StatusCode;
use serde::Deserialize;

/// Everything that can go wrong talking to a stepwise server.
///
/// No variant ever holds the API token: server messages and response snippets pass
/// through the client's redaction before they land here.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error: its `{code, message, errors?}` body, or, when
    /// the answer was not in that shape (a proxy, another program on that port), the
    /// code `unexpected_response` and a message that says what came back.
    #[error("{}", api_message(.status, .code, .message, .errors))]
    Api {
        status: StatusCode,
        code: String,
        message: String,
        /// One entry per invalid field (422 `invalid_queue_payload`), else empty.
        errors: Vec<FieldError>,
    },
    /// No answer: the connection was refused, timed out or broke off.
    #[error(
        "cannot reach the stepwise server at {url}: {}. Check --server (STEPWISE_SERVER) and that `stepwise serve` is running there.",
        cause_chain(.error)
    )]
    Transport { url: String, error: reqwest::Error },
    /// An answer that is not what this route returns.
    #[error(
        "the server at {url} sent a response this client cannot read ({detail}). Check that --server points at a stepwise server of the same version."
    )]
    Decode { url: String, detail: String },
    /// The client was set up with something unusable (a bad server URL or token).
    #[error("{0}")]
    Config(String),
}

impl ClientError {
    /// Whether the same request may succeed later unchanged: the server was unreachable,
    /// overloaded or failed internally. A 4xx needs a different request.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Transport { .. } => true,
            ClientError::Api { status, .. } => {
                status.is_server_error() || *status == StatusCode::TOO_MANY_REQUESTS
            }
            ClientError::Decode { .. } | ClientError::Config(_) => false,
        }
    }

    /// The API error code (`job_not_found`, `job_state_conflict`, …), if the server sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Builds the error for a non-2xx answer from its status and body. `location` is the
    /// redirect target of a 3xx, which the client does not follow (a POST would turn into
    /// a GET and the bearer token would travel to wherever it points).
    pub(crate) fn from_response(
        status: StatusCode,
        body: &[u8],
        url: &str,
        location: Option<&str>,
    ) -> ClientError {
        #[derive(Deserialize)]
        struct Body {
            code: String,
            message: String,
            #[serde(default)]
            errors: Vec<FieldError>,
        }
        if let Ok(body) = serde_json::from_slice::<Body>(body) {
            return ClientError::Api {
                status,
                code: body.code,
                message: body.message,
                errors: body.errors,
            };
        }
        let message = if status.is_redirection() {
            let target = location.unwrap_or("an unnamed location");
            format!("{url} redirects to {target}; pass the server's final address as --server")
        } else {
            let mut message = format!(
                "{url} answered HTTP {status} without a stepwise error body; check that --server points at a stepwise server"
            );
            let snippet = snippet(body);
            if !snippet.is_empty() {
                let _ = write!(message, " (it said: {snippet})");
            }
            message
        };
        ClientError::Api {
            status,
            code: "unexpected_response".to_string(),
            message,
            errors: Vec::new(),
        }
    }

    /// Replaces every occurrence of `secret` in the texts this error carries.
    pub(crate) fn redacted(self, secret: &str) -> ClientError {
        let clean = |text: String| super::redact(&text, secret);
        match self {
            ClientError::Api {
                status,
                code,
                message,
                errors,
            } => ClientError::Api {
                status,
                code: clean(code),
                message: clean(message),
                errors: errors
                    .into_iter()
                    .map(|e| FieldError::new(clean(e.path), clean(e.message)))
                    .collect(),
            },
            ClientError::Decode { url, detail } => ClientError::Decode {
                url: clean(url),
                detail: clean(detail),
            },
            ClientError::Config(message) => ClientError::Config(clean(message)),
            transport @ ClientError::Transport { .. } => transport,
        }
    }
}

fn api_message(status: &StatusCode, code: &str, message: &str, errors: &[FieldError]) -> String {
    let mut text = format!("{message} ({code}, HTTP {})", status.as_u16());
    for error in errors {
        let _ = write!(text, "\n{error}");
    }
    text
}

/// The first 200 characters of a body on one line: enough to recognise what answered.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// reqwest's own message ("error sending request") hides the cause a user can act on
/// ("Connection refused") in its source chain; show the whole chain.
fn cause_chain(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        next = error.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:3000/api/queue/jobs";

    #[test]
    fn an_api_error_body_becomes_code_message_and_field_errors() {
        let body =
            br#"{"code":"invalid_queue_payload","message":"the request has 2 invalid fields",
            "errors":[{"path":"payload.repository","message":"required"},
                      {"path":"payload.task.steps[1].instructions","message":"blank"}]}"#;
        let error = ClientError::from_response(StatusCode::UNPROCESSABLE_ENTITY, body, URL, None);
        let ClientError::Api {
            status,
            code,
            message,
            errors,
        } = &error
        else {
            panic!("expected an API error, got {error:?}");
        };
        assert_eq!(*status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(code, "invalid_queue_payload");
        assert_eq!(message, "the request has 2 invalid fields");
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[1].path, "payload.task.steps[1].instructions");
        let shown = error.to_string();
        let lines: Vec<_> = shown.lines().collect();
        assert_eq!(
            lines,
            [
                "the request has 2 invalid fields (invalid_queue_payload, HTTP 422)",
                "payload.repository: required",
                "payload.task.steps[1].instructions: blank",
            ]
        );
        assert!(!error.is_retryable());
        assert_eq!(error.code(), Some("invalid_queue_payload"));
    }

    #[test]
    fn an_error_without_field_errors_decodes_with_an_empty_list() {
        let body = br#"{"code":"job_not_found","message":"job x not found"}"#;
        let error = ClientError::from_response(StatusCode::NOT_FOUND, body, URL, None);
        assert!(matches!(&error, ClientError::Api { errors, .. } if errors.is_empty()));
        assert_eq!(
            error.to_string(),
            "job x not found (job_not_found, HTTP 404)"
        );
    }

    #[test]
    fn a_body_that_is_not_the_api_shape_names_the_status_and_what_came_back() {
        let body = b"<html>\n  <body>502 Bad Gateway</body>\n</html>";
        let error = ClientError::from_response(StatusCode::BAD_GATEWAY, body, URL, None);
        assert_eq!(error.code(), Some("unexpected_response"));
        let shown = error.to_string();
        assert!(shown.contains("HTTP 502"), "{shown}");
        assert!(
            shown.contains("<html> <body>502 Bad Gateway</body> </html>"),
            "{shown}"
        );
        assert!(shown.contains("--server"), "{shown}");
        assert!(error.is_retryable(), "a 5xx may pass");
    }

    #[test]
    fn a_long_foreign_body_is_cut_to_a_snippet() {
        let body = "x".repeat(5000);
        let error = ClientError::from_response(StatusCode::NOT_FOUND, body.as_bytes(), URL, None);
        let shown = error.to_string();
        assert!(shown.len() < 600, "{}", shown.len());
        assert!(shown.contains("…"));
    }

    #[test]
    fn a_redirect_says_where_to_point_the_client_instead() {
        let error = ClientError::from_response(
            StatusCode::MOVED_PERMANENTLY,
            b"",
            URL,
            Some("https://queue.example/api/queue/jobs"),
        );
        let shown = error.to_string();
        assert!(
            shown.contains("redirects to https://queue.example/api/queue/jobs"),
            "{shown}"
        );
        assert!(shown.contains("--server"), "{shown}");
    }

    #[test]
    fn too_many_requests_and_server_errors_are_retryable_client_errors_are_not() {
        let api = |status| ClientError::Api {
            status,
            code: "x".into(),
            message: "y".into(),
            errors: vec![],
        };
        assert!(api(StatusCode::TOO_MANY_REQUESTS).is_retryable());
        assert!(api(StatusCode::SERVICE_UNAVAILABLE).is_retryable());
        assert!(!api(StatusCode::CONFLICT).is_retryable());
        assert!(!api(StatusCode::UNAUTHORIZED).is_retryable());
        let decode = ClientError::Decode {
            url: URL.into(),
            detail: "d".into(),
        };
        assert!(!decode.is_retryable());
    }

    #[test]
    fn redaction_removes_the_secret_from_messages_and_field_errors() {
        let secret = "swu_topsecretvalue";
        let body = format!(
            r#"{{"code":"invalid_request","message":"bad token {secret}","errors":[{{"path":"{secret}","message":"echo {secret}"}}]}}"#
        );
        let error = ClientError::from_response(StatusCode::BAD_REQUEST, body.as_bytes(), URL, None)
            .redacted(secret);
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains(secret), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
        let decode = ClientError::Decode {
            url: URL.into(),
            detail: format!("saw {secret}"),
        }
        .redacted(secret);
        assert!(!format!("{decode} {decode:?}").contains(secret));
    }
}
