//! Secrets out of everything the worker writes or sends: step logs, events, artifacts and
//! task_context.json all pass through one [`Redactor`] first.
//!
//! Two nets. The exact values the worker knows are secret: its own token, what the task's
//! auth refs resolve to, configured secrets. And the shapes of common credentials (GitHub,
//! OpenAI, Anthropic, Google, AWS, Bearer headers, stepwise's own tokens), so that a key an
//! agent found and printed is caught even though nobody declared it.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::{Captures, Regex};

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Known secrets shorter than this are not replaced: a two-letter "secret" would blank
/// every occurrence of those letters in every log. Such a value is no credential anyway.
pub const MIN_SECRET_LEN: usize = 8;

/// Credential shapes. A match is replaced whole, except its `keep…` group, which stays (the
/// `Bearer ` of a header, the name of a variable), so the log still says what was there.
const SHAPES: &[&str] = &[
    // GitHub: personal, OAuth, user-to-server, server-to-server and refresh tokens.
    r"\bgh[pousr]_[A-Za-z0-9]{36,}",
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    // OpenAI (sk-, sk-proj-, sk-svcacct-…) and Anthropic (sk-ant-…).
    r"\bsk-[A-Za-z0-9_-]{20,}",
    // Google API keys (Gemini).
    r"\bAIza[0-9A-Za-z_-]{35}",
    // AWS access key ids, and secret keys where they are named.
    r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
    r"(?i:(?P<keep_aws>aws_secret_access_key[\s\x22']*[=:][\s\x22']*)[A-Za-z0-9/+=]{40})",
    // Authorization headers, whatever the token looks like.
    r"(?i:(?P<keep_bearer>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,})",
    // stepwise's own user and worker tokens, session cookies and login codes.
    r"\bsw[uwsl]_[0-9a-f]{16,}",
];

/// Environment variables whose values are secret wherever a worker runs: the agent CLIs'
/// API keys and the usual git host and cloud credentials. Their values are redacted even
/// when they do not look like a token.
pub const SECRET_ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "STEPWISE_TOKEN",
    "STEPWISE_WORKER_TOKEN",
];

/// The values of [`SECRET_ENV`] and of the `extra` variables that `env` has set.
pub fn secrets_from_env(extra: &[String], env: impl Fn(&str) -> Option<String>) -> Vec<String> {
    SECRET_ENV
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .filter_map(env)
        .filter(|v| !v.trim().is_empty())
        .collect()
}

#[derive(Debug, Clone)]
pub struct Redactor {
    known: Vec<String>,
    /// Every known secret in one pass over the text, the longest where several start at
    /// the same place, so a secret that contains another is replaced whole. `None` when
    /// there are none.
    matcher: Option<AhoCorasick>,
    shapes: Regex,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(Vec::<String>::new())
    }
}

impl Redactor {
    /// A redactor for these known secret values, besides the shapes.
    pub fn new(secrets: impl IntoIterator<Item = impl Into<String>>) -> Redactor {
        let mut known: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        known.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        known.dedup();
        let alternatives: Vec<String> = SHAPES.iter().map(|shape| format!("(?:{shape})")).collect();
        // ASCII classes only: every shape is ASCII, and it keeps the Unicode tables out.
        let shapes = Regex::new(&format!("(?-u){}", alternatives.join("|")))
            .expect("the credential shapes are valid");
        let matcher = (!known.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&known)
                .expect("known secrets make a matcher")
        });
        Redactor {
            known,
            matcher,
            shapes,
        }
    }

    /// Another redactor that also knows `secrets`.
    pub fn with(&self, secrets: impl IntoIterator<Item = impl Into<String>>) -> Redactor {
        Redactor::new(
            self.known
                .iter()
                .cloned()
                .chain(secrets.into_iter().map(Into::into)),
        )
    }

    /// `text` with every secret replaced; borrowed when there was none.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let out = match &self.matcher {
            Some(matcher) if matcher.is_match(text) => {
                let mut clean = String::with_capacity(text.len());
                matcher.replace_all_with(text, &mut clean, |_, _, clean| {
                    clean.push_str(REDACTED);
                    true
                });
                Cow::Owned(clean)
            }
            _ => Cow::Borrowed(text),
        };
        let replaced = self.shapes.replace_all(&out, |caps: &Captures<'_>| {
            let keep = caps.name("keep_aws").or_else(|| caps.name("keep_bearer"));
            format!("{}{REDACTED}", keep.map_or("", |k| k.as_str()))
        });
        match replaced {
            Cow::Borrowed(_) => out,
            Cow::Owned(replaced) => Cow::Owned(replaced),
        }
    }

    /// `text` redacted, then cut to at most `max_bytes` (on a character boundary). Always
    /// in this order: a secret cut short first would no longer match, and leak in part.
    pub fn redact_and_cut(&self, text: &str, max_bytes: usize) -> String {
        contract::text::cut_to_bytes(&self.redact(text), max_bytes).to_string()
    }

    /// Redacts every string in a JSON document, object keys included.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.redact(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut v) in entries {
                    self.redact_json(&mut v);
                    map.insert(self.redact(&key).into_owned(), v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn secret_environment_variables_are_known_secrets() {
        let env = |name: &str| match name {
            "ANTHROPIC_API_KEY" => Some("plain-looking-value-1".to_string()),
            "MY_DEPLOY_KEY" => Some("another-plain-value".to_string()),
            "GH_TOKEN" => Some("  ".to_string()),
            _ => None,
        };
        let secrets = secrets_from_env(&["MY_DEPLOY_KEY".into()], env);
        assert_eq!(secrets, ["plain-looking-value-1", "another-plain-value"]);
        let redactor = Redactor::new(secrets);
        assert_eq!(
            redactor.redact("a plain-looking-value-1 b another-plain-value"),
            "a [REDACTED] b [REDACTED]"
        );
    }

    use serde_json::json;

    use super::*;

    #[test]
    fn common_credential_shapes_are_redacted() {
        let r = Redactor::default();
        let cases = [
            (
                "token ghp_0123456789abcdefghijABCDEFGHIJ0123456789 ok",
                "token [REDACTED] ok",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[REDACTED]",
            ),
            (
                "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx12",
                "OPENAI_API_KEY=[REDACTED]",
            ),
            (
                "key: sk-ant-api03-abcdefghijklmnopqrstuvwxyz-0123",
                "key: [REDACTED]",
            ),
            (
                "GEMINI_API_KEY=AIzaSyA0123456789abcdefghijklmnopqrstuv",
                "GEMINI_API_KEY=[REDACTED]",
            ),
            ("id AKIAIOSFODNN7EXAMPLE,", "id [REDACTED],"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = [REDACTED]",
            ),
            (
                "Authorization: Bearer abc.def-ghi_jkl",
                "Authorization: Bearer [REDACTED]",
            ),
            ("swu_0123456789abcdef0123", "[REDACTED]"),
        ];
        for (text, expected) in cases {
            assert_eq!(r.redact(text), expected, "{text}");
        }
    }

    #[test]
    fn known_secrets_are_redacted_whatever_their_shape() {
        let r = Redactor::new(["hunter2-is-my-password", "hunter2-is-my"]);
        assert_eq!(
            r.redact("pw=hunter2-is-my-password and hunter2-is-my"),
            "pw=[REDACTED] and [REDACTED]"
        );
    }

    #[test]
    fn text_without_secrets_is_untouched_and_borrowed() {
        let r = Redactor::new(["a-long-secret-value"]);
        let text = "skip the sk- prefix talk; bearer of news; AKIA alone";
        assert!(matches!(r.redact(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn short_known_values_are_not_treated_as_secrets() {
        let r = Redactor::new(["abc"]);
        assert_eq!(r.redact("abcdef"), "abcdef");
    }

    #[test]
    fn redaction_is_idempotent() {
        let r = Redactor::new(["my-very-secret-value"]);
        let once = r
            .redact("x my-very-secret-value Bearer abcdefghij")
            .into_owned();
        assert_eq!(r.redact(&once), once);
    }

    #[test]
    fn every_string_of_a_json_document_is_redacted() {
        let r = Redactor::new(["my-very-secret-value"]);
        let mut doc = json!({
            "summary": "used my-very-secret-value",
            "nested": [{ "header": "Bearer abcdefghijkl" }, 3, null],
            "my-very-secret-value": true,
        });
        r.redact_json(&mut doc);
        assert_eq!(
            doc,
            json!({
                "summary": "used [REDACTED]",
                "nested": [{ "header": "Bearer [REDACTED]" }, 3, null],
                "[REDACTED]": true,
            })
        );
    }

    #[test]
    fn a_redactor_can_learn_more_secrets() {
        let base = Redactor::new(["first-secret-value"]);
        let more = base.with(["second-secret-value"]);
        assert_eq!(
            more.redact("first-secret-value second-secret-value"),
            "[REDACTED] [REDACTED]"
        );
        assert_eq!(base.redact("second-secret-value"), "second-secret-value");
    }
}
