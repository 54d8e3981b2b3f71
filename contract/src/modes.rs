//! The closed vocabularies of a task: which agent CLI runs it and how its result is published.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The agent CLI that executes every step of a task.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeMode {
    #[default]
    Codex,
    Claude,
    Gemini,
}

impl RuntimeMode {
    pub const ALL: [RuntimeMode; 3] =
        [RuntimeMode::Codex, RuntimeMode::Claude, RuntimeMode::Gemini];

    /// The wire spelling, which is also the worker capability that runtime needs.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeMode::Codex => "codex",
            RuntimeMode::Claude => "claude",
            RuntimeMode::Gemini => "gemini",
        }
    }

    /// Reasoning-effort levels the runtime's CLI understands, lowest first. The task form,
    /// REST, the CLI and the worker all take them from here.
    ///
    /// codex passes its effort to the API unchecked: these are the levels its bundled
    /// models list (every one has low…xhigh, most `max`, some `ultra`; none `minimal` any
    /// more), and a model that lacks one answers with an error the step reports.
    pub fn efforts(self) -> &'static [&'static str] {
        match self {
            RuntimeMode::Codex => &["low", "medium", "high", "xhigh", "max", "ultra"],
            RuntimeMode::Claude => &["low", "medium", "high", "xhigh", "max"],
            RuntimeMode::Gemini => &["low", "medium", "high"],
        }
    }
}

/// What happens to the agent's changes once every step has succeeded.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PublishMode {
    None,
    Branch,
    #[default]
    Pr,
}

impl PublishMode {
    pub const ALL: [PublishMode; 3] = [PublishMode::None, PublishMode::Branch, PublishMode::Pr];

    pub fn as_str(self) -> &'static str {
        match self {
            PublishMode::None => "none",
            PublishMode::Branch => "branch",
            PublishMode::Pr => "pr",
        }
    }
}

/// A string that is none of the values a mode accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseModeError {
    /// Which vocabulary was parsed ("runtime" or "publish mode").
    pub kind: &'static str,
    pub value: String,
    pub accepted: &'static [&'static str],
}

impl fmt::Display for ParseModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} `{}`; use one of: {}",
            self.kind,
            self.value,
            self.accepted.join(", ")
        )
    }
}

impl std::error::Error for ParseModeError {}

const RUNTIME_NAMES: &[&str] = &["codex", "claude", "gemini"];
const PUBLISH_NAMES: &[&str] = &["none", "branch", "pr"];

/// Forms, env files and hand-written JSON differ in case and stray spaces; accepting
/// those costs nothing because the normalized output always uses the canonical spelling.
fn parse_variant<T: Copy>(
    s: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
    kind: &'static str,
    accepted: &'static [&'static str],
) -> Result<T, ParseModeError> {
    let wanted = s.trim();
    all.iter()
        .copied()
        .find(|v| name(*v).eq_ignore_ascii_case(wanted))
        .ok_or_else(|| ParseModeError {
            kind,
            value: s.to_string(),
            accepted,
        })
}

impl FromStr for RuntimeMode {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_variant(s, &Self::ALL, Self::as_str, "runtime", RUNTIME_NAMES)
    }
}

impl FromStr for PublishMode {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_variant(s, &Self::ALL, Self::as_str, "publish mode", PUBLISH_NAMES)
    }
}

impl fmt::Display for RuntimeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for PublishMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_name_lists_match_the_variants() {
        let runtimes: Vec<_> = RuntimeMode::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(runtimes, RUNTIME_NAMES);
        let publish: Vec<_> = PublishMode::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(publish, PUBLISH_NAMES);
    }

    #[test]
    fn parsing_ignores_case_and_surrounding_space() {
        assert_eq!(" Claude ".parse::<RuntimeMode>(), Ok(RuntimeMode::Claude));
        assert_eq!("PR".parse::<PublishMode>(), Ok(PublishMode::Pr));
        let err = "cursor".parse::<RuntimeMode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown runtime `cursor`; use one of: codex, claude, gemini"
        );
    }
}
