//! Reading untyped JSON while collecting every problem with its path.

use std::str::FromStr;

use serde_json::{Map, Value};

use crate::error::FieldError;
use crate::modes::ParseModeError;
use crate::rules;

/// Marks a value whose problem has already been recorded, so callers skip follow-up
/// checks instead of piling a second, derivative error on the same field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported;

pub type Checked<T> = Result<T, Reported>;

#[derive(Debug, Default)]
pub struct Walker {
    pub errors: Vec<FieldError>,
}

/// Absent and `null` both mean "not given": clients differ on which they send.
pub fn field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

pub fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

pub fn at(prefix: &str, index: usize) -> String {
    format!("{prefix}[{index}]")
}

/// A path segment for a key the client made up: keys can be anything, including huge
/// or multi-line strings, and a path has to stay one readable line.
pub fn join_user_key(prefix: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key.len() <= 64
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        join(prefix, key)
    } else {
        format!("{prefix}[\"{}\"]", short(key))
    }
}

/// A user value quoted in a message: escaped and cut, so an error stays one short line.
pub fn short(value: &str) -> String {
    const MAX: usize = 40;
    let mut out: String = value
        .chars()
        .take(MAX)
        .flat_map(char::escape_debug)
        .collect();
    if value.chars().count() > MAX {
        out.push('…');
    }
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "true/false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Walker {
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError::new(path, message));
    }

    pub fn expected(&mut self, path: impl Into<String>, what: &str, got: &Value) {
        self.error(path, format!("expected {what}, got {}", type_name(got)));
    }

    pub fn object<'a>(&mut self, v: &'a Value, path: &str) -> Option<&'a Map<String, Value>> {
        let map = v.as_object();
        if map.is_none() {
            self.expected(path, "an object", v);
        }
        map
    }

    /// Unknown fields are errors because dropping them would silently ignore what the
    /// client meant (often a typo of an accepted field).
    pub fn reject_unknown(&mut self, map: &Map<String, Value>, prefix: &str, accepted: &[&str]) {
        for key in map.keys().filter(|k| !accepted.contains(&k.as_str())) {
            self.error(
                join_user_key(prefix, key),
                format!(
                    "unknown field; the accepted fields are {}",
                    accepted.join(", ")
                ),
            );
        }
    }

    /// Every string of a task is read here, so a NUL anywhere in one is refused at its
    /// path (see [`crate::text`]).
    pub fn string<'a>(&mut self, v: &'a Value, path: &str) -> Checked<&'a str> {
        match v.as_str() {
            Some(s) => match crate::text::refuse_nul(path, s) {
                Ok(()) => Ok(s),
                Err(error) => {
                    self.errors.push(error);
                    Err(Reported)
                }
            },
            None => {
                self.expected(path, "a string", v);
                Err(Reported)
            }
        }
    }

    pub fn opt_string<'a>(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Checked<Option<&'a str>> {
        field(map, key).map(|v| self.string(v, path)).transpose()
    }

    /// A trimmed string where blank means "not given", as an empty form input does.
    pub fn opt_text(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Checked<Option<String>> {
        let s = self.opt_string(map, key, path)?;
        Ok(s.map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string))
    }

    /// For values carried through as given (a skill's arguments, a container's other
    /// settings): refuses a NUL in any string or key inside, at its path.
    pub fn no_nul_inside(&mut self, v: &Value, path: &str) {
        match v {
            Value::String(s) => {
                if let Err(error) = crate::text::refuse_nul(path, s) {
                    self.errors.push(error);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.no_nul_inside(item, &at(path, i));
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    let inner = join_user_key(path, key);
                    if let Err(error) = crate::text::refuse_nul(&inner, key) {
                        self.errors.push(error);
                    }
                    self.no_nul_inside(item, &inner);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Large and negative integers are returned as is (saturated), for the range check.
    pub fn integer(&mut self, v: &Value, path: &str) -> Checked<i64> {
        let n = v.as_i64().or_else(|| v.as_u64().map(|_| i64::MAX));
        n.ok_or_else(|| self.expected(path, "an integer", v))
            .map_err(|()| Reported)
    }

    pub fn boolean(&mut self, v: &Value, path: &str) -> Checked<bool> {
        v.as_bool()
            .ok_or_else(|| self.expected(path, "true or false", v))
            .map_err(|()| Reported)
    }

    /// The integer at `key` of `map` (reported at `path`) within `range`; `default` when
    /// absent, and after an error.
    pub fn bounded<T>(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        path: &str,
        range: std::ops::RangeInclusive<T>,
        default: T,
    ) -> T
    where
        T: Copy + TryFrom<i64> + PartialOrd + std::fmt::Display,
    {
        let Some(v) = field(map, key) else {
            return default;
        };
        let Ok(n) = self.integer(v, path) else {
            return default;
        };
        match T::try_from(n) {
            Ok(n) if range.contains(&n) => n,
            _ => {
                self.error(
                    path,
                    format!("must be between {} and {}", range.start(), range.end()),
                );
                default
            }
        }
    }

    /// Reports `message` at `path` when `check` fails; `Ok` carries the value on.
    pub fn check<T>(
        &mut self,
        value: T,
        path: &str,
        check: impl FnOnce(&T) -> Result<(), String>,
    ) -> Checked<T> {
        match check(&value) {
            Ok(()) => Ok(value),
            Err(message) => {
                self.error(path, message);
                Err(Reported)
            }
        }
    }
}

/// Reads a runtime or publish mode; the wire spelling is lowercase, but any case is accepted.
pub fn mode<T>(
    w: &mut Walker,
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Checked<Option<T>>
where
    T: FromStr<Err = ParseModeError>,
{
    let Some(s) = w.opt_string(map, key, path)? else {
        return Ok(None);
    };
    s.parse().map(Some).map_err(|e: ParseModeError| {
        w.error(
            path,
            ParseModeError {
                value: short(s),
                ..e
            }
            .to_string(),
        );
        Reported
    })
}

/// Valid items come back trimmed and lowercased; invalid ones are reported and left out.
pub fn capability_list(w: &mut Walker, v: Option<&Value>, path: &str) -> Vec<String> {
    let Some(v) = v else { return Vec::new() };
    let Some(items) = v.as_array() else {
        w.expected(path, "an array of strings", v);
        return Vec::new();
    };
    let mut caps = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = at(path, i);
        let Ok(s) = w.string(item, &item_path) else {
            continue;
        };
        match rules::capability(s) {
            Ok(c) => caps.push(c),
            Err(message) => w.error(item_path, message),
        }
    }
    caps
}
