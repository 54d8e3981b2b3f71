//! What the queue does with text it is about to store, decided once for every front door
//! and both backends (and, at the end, how a text is cut to one line to be shown). PostgreSQL cannot hold U+0000 (NUL) in `text` or `jsonb` and SQLite
//! can, so without one rule the same request would be stored on one and fail on the other.
//!
//! - Text someone typed or configured (a task and everything in it, a cancel reason, a list
//!   filter, a worker's capabilities and version, a token's name) is refused with a field
//!   error naming where the NUL is: the sender can fix it, and nothing is stored changed.
//! - Text a worker reports from an agent's output (event messages and payloads, a job's
//!   `errorMessage` and `resultSummary`) is kept, each NUL replaced with U+FFFD: an agent
//!   printing a stray NUL must not cost the job its failure message or its log line.

use std::borrow::Cow;

use serde_json::Value;

use crate::error::FieldError;

/// What a NUL in reported text becomes.
pub const NUL_REPLACEMENT: char = '\u{FFFD}';

/// The message of a refused NUL.
pub const NUL_MESSAGE: &str = "must not contain the NUL character (U+0000)";

/// Refuses typed text that holds a NUL, naming `path`.
pub fn refuse_nul(path: &str, text: &str) -> Result<(), FieldError> {
    if text.contains('\0') {
        return Err(FieldError::new(path, NUL_MESSAGE));
    }
    Ok(())
}

/// Reported text with each NUL replaced; borrowed when there was none.
pub fn replace_nul(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// [`replace_nul`] on every string of a reported JSON document, object keys included.
pub fn replace_nul_in_json(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(clean) = replace_nul(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(replace_nul_in_json),
        Value::Object(map) => {
            if map.keys().any(|k| k.contains('\0')) {
                let entries = std::mem::take(map);
                for (key, v) in entries {
                    map.insert(replace_nul(&key).into_owned(), v);
                }
            }
            map.values_mut().for_each(replace_nul_in_json);
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The longest start of `text` that fits in `max_bytes` without splitting a character.
/// Cut only text that was already redacted: a secret cut in two matches no pattern.
pub fn cut_to_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The first non-blank line of `text`, cut to at most `width` characters with `…`: a
/// line to name or sum something up by (a table row, a task's name, a summary), the whole
/// text being elsewhere.
pub fn first_line(text: &str, width: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= width {
        line.to_string()
    } else {
        let cut: String = line.chars().take(width.saturating_sub(1)).collect();
        let cut_mid_word = line
            .chars()
            .nth(cut.chars().count())
            .is_some_and(|c| !c.is_whitespace());
        // Half a word reads as a typo; end on the last whole one when there is one.
        let cut = match cut.rfind(char::is_whitespace) {
            Some(space) if cut_mid_word => &cut[..space],
            _ => cut.as_str(),
        };
        format!("{}…", cut.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn typed_text_with_a_nul_is_refused_at_its_path() {
        assert!(refuse_nul("reason", "fine").is_ok());
        let err = refuse_nul("reason", "a\0b").unwrap_err();
        assert_eq!(err.path, "reason");
        assert_eq!(err.message, NUL_MESSAGE);
    }

    #[test]
    fn reported_text_keeps_everything_but_the_nul() {
        assert!(matches!(replace_nul("plain"), Cow::Borrowed("plain")));
        assert_eq!(replace_nul("a\0b\0"), "a\u{FFFD}b\u{FFFD}");
        let mut doc = json!({"k\0ey": ["x\0", 1, {"n": "\0"}], "ok": true});
        replace_nul_in_json(&mut doc);
        assert_eq!(
            doc,
            json!({"k\u{FFFD}ey": ["x\u{FFFD}", 1, {"n": "\u{FFFD}"}], "ok": true})
        );
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(cut_to_bytes("héllo", 2), "h");
        assert_eq!(cut_to_bytes("héllo", 3), "hé");
        assert_eq!(cut_to_bytes("short", 99), "short");
        assert_eq!(cut_to_bytes("🦀🦀", 5), "🦀");
    }
}
