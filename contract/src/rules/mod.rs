//! Validators for single values. Each returns the user-facing reason on failure; the
//! caller attaches the path. None of them echo secrets back. Public so the server holds
//! its task defaults to the same rules as a task's own fields.

use crate::limits;
use crate::modes::RuntimeMode;

mod repository;
pub use repository::{repository, repository_key};

fn has_space_or_control(s: &str) -> bool {
    s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// `[first][rest]{0,63}`: the shape shared by skill ids, step ids and capabilities.
fn is_slug(s: &str, first: impl Fn(char) -> bool, rest: impl Fn(char) -> bool) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if first(c) => {}
        _ => return false,
    }
    s.chars().count() <= limits::ID_CHARS && chars.all(rest)
}

/// The subset of `git check-ref-format` rules that a user can trip over in a form.
pub fn branch_name(v: &str) -> Result<(), String> {
    if v.chars().count() > limits::BRANCH_CHARS {
        return Err(format!("at most {} characters", limits::BRANCH_CHARS));
    }
    if has_space_or_control(v) {
        return Err("a branch name cannot contain spaces or control characters".into());
    }
    if let Some(c) = v.chars().find(|c| "~^:?*[\\".contains(*c)) {
        return Err(format!("a branch name cannot contain `{c}`"));
    }
    for bad in ["..", "@{", "//"] {
        if v.contains(bad) {
            return Err(format!("a branch name cannot contain `{bad}`"));
        }
    }
    for bad in ["-", "/"] {
        if v.starts_with(bad) {
            return Err(format!("a branch name cannot start with `{bad}`"));
        }
    }
    for bad in ["/", ".", ".lock"] {
        if v.ends_with(bad) {
            return Err(format!("a branch name cannot end with `{bad}`"));
        }
    }
    if v == "@" {
        return Err("`@` alone is not a branch name".into());
    }
    if v.split('/')
        .any(|part| part.starts_with('.') || part.ends_with(".lock"))
    {
        return Err(
            "no part of a branch name between `/` may start with `.` or end with `.lock`".into(),
        );
    }
    Ok(())
}

pub fn skill_id(v: &str) -> Result<(), String> {
    if v == "auto" {
        return Ok(());
    }
    // Skill ids become directory names under .agents/skills/; say plainly why a path is refused.
    if v.contains('/') || v.contains('\\') {
        return Err("a skill id names one directory under .agents/skills/, so it cannot contain `/` or `\\`".into());
    }
    if v.starts_with('.') {
        return Err(
            "a skill id names one directory under .agents/skills/, so it cannot start with `.`"
                .into(),
        );
    }
    if v.chars().count() > limits::ID_CHARS {
        return Err(format!("at most {} characters", limits::ID_CHARS));
    }
    let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if is_slug(v, lower, |c| lower(c) || matches!(c, '.' | '_' | '-')) {
        return Ok(());
    }
    Err(
        "use `auto` or a skill name of lowercase letters, digits, `.`, `_` and `-`, \
         starting with a letter or digit"
            .into(),
    )
}

pub fn step_id(v: &str) -> Result<(), String> {
    if is_slug(v, is_alnum, |c| is_alnum(c) || matches!(c, '.' | '_' | '-')) {
        return Ok(());
    }
    Err(format!(
        "a step id is letters, digits, `.`, `_` and `-`, starts with a letter or digit, \
         and has at most {} characters",
        limits::ID_CHARS
    ))
}

/// Trims and lowercases (ASCII: a capability is ASCII anyway, and the browser bundle is
/// spared the Unicode case tables), because workers advertise capabilities in lowercase.
pub fn capability(v: &str) -> Result<String, String> {
    let c = v.trim().to_ascii_lowercase();
    let first = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if is_slug(&c, first, |c| {
        first(c) || matches!(c, '.' | '_' | ':' | '-')
    }) {
        return Ok(c);
    }
    if c.is_empty() {
        return Err("a capability cannot be blank".into());
    }
    Err(format!(
        "a capability is lowercase letters, digits, `.`, `_`, `:` and `-`, starts with a \
         letter or digit, and has at most {} characters",
        limits::ID_CHARS
    ))
}

pub fn model(v: &str) -> Result<(), String> {
    if v.chars().count() > limits::MODEL_CHARS {
        return Err(format!("at most {} characters", limits::MODEL_CHARS));
    }
    if has_space_or_control(v) {
        return Err("a model name cannot contain spaces or control characters".into());
    }
    Ok(())
}

/// Returns the lowercase effort when the runtime's CLI accepts it.
pub fn effort(runtime: RuntimeMode, v: &str) -> Result<String, String> {
    let e = v.trim().to_ascii_lowercase();
    if runtime.efforts().contains(&e.as_str()) {
        return Ok(e);
    }
    Err(format!(
        "{} does not accept this effort; use one of: {}",
        runtime.as_str(),
        runtime.efforts().join(", ")
    ))
}

pub const AUTH_REF_FORMS: &str = "env://NAME or file:///absolute/path";

/// Never includes the value in the message: if it is a secret, echoing it would put it
/// in logs, API responses and screenshots.
pub fn auth_ref(v: &str) -> Result<(), String> {
    if looks_like_secret(v) {
        return Err(format!(
            "this looks like a raw secret token; never put secrets in a task. Keep the secret \
             in the worker's environment or a file and reference it as {AUTH_REF_FORMS}"
        ));
    }
    if let Some(name) = v.strip_prefix("env://") {
        let first = |c: char| c.is_ascii_alphabetic() || c == '_';
        let ok = name.starts_with(first) && name.chars().all(|c| first(c) || c.is_ascii_digit());
        return ok.then_some(()).ok_or_else(|| {
            "env:// must be followed by an environment variable name (letters, digits and `_`)"
                .into()
        });
    }
    if let Some(path) = v.strip_prefix("file://") {
        let ok = path.starts_with('/')
            && !has_space_or_control(path)
            && !path.split('/').any(|part| part == "..");
        return ok.then_some(()).ok_or_else(|| {
            "file:// must be followed by an absolute path without `..`, e.g. file:///run/secrets/token".into()
        });
    }
    Err(format!(
        "must be a reference, {AUTH_REF_FORMS}, never the secret itself"
    ))
}

fn looks_like_secret(v: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "sk-",
        "xox",
        "AKIA",
        "glpat-",
    ];
    let lower = v.to_ascii_lowercase();
    if PREFIXES.iter().any(|p| v.starts_with(p))
        || lower.starts_with("bearer ")
        || lower.starts_with("token ")
    {
        return true;
    }
    // A long bare word with no scheme is almost certainly a key of a format not listed above.
    !v.contains("://") && v.len() >= 20 && v.chars().all(|c| is_alnum(c) || matches!(c, '_' | '-'))
}

/// Rejects what would break a one-line label: line breaks and other control characters.
pub fn single_line(v: &str) -> Result<(), String> {
    if v.chars().any(char::is_control) {
        return Err("must be a single line without control characters".into());
    }
    Ok(())
}

/// Where a task's end is posted: an absolute http(s) address with a host, on one line, at
/// most 2,000 characters.
pub fn webhook_url(v: &str) -> Result<(), String> {
    max_chars(v, 2000)?;
    let rest = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"))
        .ok_or("must be an http:// or https:// address")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.contains('@') {
        // It would be stored and shown with the task: a secret belongs elsewhere.
        return Err("must not hold a user or password (user@host)".into());
    }
    if host.trim_start_matches('[').is_empty()
        || v.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("must be an address with a host and no spaces".into());
    }
    Ok(())
}

/// A regular expression a check's output must match. Where the regex engine is built in
/// (the `patterns` feature: the queue, the worker), it must compile; the browser's build
/// takes any text and leaves the verdict to the server.
pub fn pattern(v: &str) -> Result<(), String> {
    #[cfg(feature = "patterns")]
    if let Err(e) = regex::Regex::new(v) {
        let why = e.to_string();
        let why = why.lines().last().unwrap_or("invalid").trim();
        return Err(format!("not a valid regular expression: {why}"));
    }
    let _ = v;
    Ok(())
}

pub fn max_chars(v: &str, max: usize) -> Result<(), String> {
    if v.chars().count() > max {
        return Err(format!(
            "at most {max} characters (got {})",
            v.chars().count()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_name_rules() {
        for ok in ["main", "feature/x-1", "release/v1.2", "a@b"] {
            assert_eq!(branch_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "a b", "a..b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b", "a@{b", "-a", "/a",
            "a/", "a.", "a.lock", "a//b", "@", "a/.b", "x.lock/y", "a\tb",
        ] {
            assert!(branch_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn skill_ids_cannot_name_paths() {
        assert_eq!(skill_id("auto"), Ok(()));
        assert_eq!(skill_id("speckit"), Ok(()));
        assert_eq!(skill_id("a.b_c-1"), Ok(()));
        assert!(skill_id("../x").unwrap_err().contains("cannot contain `/`"));
        assert!(
            skill_id("..")
                .unwrap_err()
                .contains("cannot start with `.`")
        );
        assert!(skill_id("/").is_err());
        assert!(skill_id("Speckit").is_err());
        assert!(skill_id(&"a".repeat(65)).is_err());
        assert_eq!(skill_id(&"a".repeat(64)), Ok(()));
    }

    #[test]
    fn capabilities_are_trimmed_and_lowercased() {
        assert_eq!(capability("  Docker "), Ok("docker".to_string()));
        assert_eq!(capability("gpu:a100"), Ok("gpu:a100".to_string()));
        assert!(capability("").is_err());
        assert!(capability("-x").is_err());
        assert!(capability("a b").is_err());
    }

    #[test]
    fn secrets_are_recognised() {
        for s in [
            "ghp_abc",
            "github_pat_x",
            "sk-123",
            "xoxb-1",
            "AKIAXXXX",
            "Bearer abc",
            "abcdefghijklmnopqrstuvwxyz012345",
        ] {
            assert!(looks_like_secret(s), "{s}");
        }
        for s in ["env://GITHUB_TOKEN", "file:///run/secrets/gh"] {
            assert!(!looks_like_secret(s), "{s}");
            assert_eq!(auth_ref(s), Ok(()));
        }
        assert!(auth_ref("env://1X").is_err());
        assert!(auth_ref("file://relative").is_err());
        assert!(auth_ref("file:///a/../b").is_err());
        assert!(auth_ref("hunter2").is_err());
    }
}
