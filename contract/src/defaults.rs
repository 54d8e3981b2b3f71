//! Server-side defaults for the fields a task may leave out, read from the environment.
//!
//! | variable | meaning | when unset |
//! | --- | --- | --- |
//! | `STEPWISE_DEFAULT_PUBLISH_MODE` | `none`, `branch` or `pr` | `pr` |
//! | `MOONMIND_DEFAULT_PUBLISH_MODE` | alias of the above, kept for MoonMind deployments | |
//! | `STEPWISE_DEFAULT_RUNTIME` | `codex`, `claude` or `gemini` | `codex` |
//! | `STEPWISE_{CODEX,CLAUDE,GEMINI}_MODEL` | model passed to that runtime | the CLI's own default |
//! | `STEPWISE_{CODEX,CLAUDE,GEMINI}_EFFORT` | effort for that runtime | the CLI's own default |
//!
//! Empty or whitespace-only values count as unset. An invalid value is a
//! [`ConfigError`], never a silent fallback: a typo in a deployment's env would
//! otherwise quietly change what every task does (e.g. open PRs nobody asked for).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::modes::{PublishMode, RuntimeMode};
use crate::rules;

pub const PUBLISH_MODE_VAR: &str = "STEPWISE_DEFAULT_PUBLISH_MODE";
pub const PUBLISH_MODE_ALIAS_VAR: &str = "MOONMIND_DEFAULT_PUBLISH_MODE";
pub const RUNTIME_VAR: &str = "STEPWISE_DEFAULT_RUNTIME";

/// An environment variable [`Defaults::from_env`] reads, with a line for documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    pub name: &'static str,
    pub meaning: &'static str,
}

pub const ENV_VARS: &[EnvVar] = &[
    EnvVar {
        name: PUBLISH_MODE_VAR,
        meaning: "default publish mode: none, branch or pr (default pr)",
    },
    EnvVar {
        name: PUBLISH_MODE_ALIAS_VAR,
        meaning: "alias of STEPWISE_DEFAULT_PUBLISH_MODE",
    },
    EnvVar {
        name: RUNTIME_VAR,
        meaning: "default runtime: codex, claude or gemini (default codex)",
    },
    EnvVar {
        name: "STEPWISE_CODEX_MODEL",
        meaning: "default model for codex (default: the CLI's)",
    },
    EnvVar {
        name: "STEPWISE_CODEX_EFFORT",
        meaning: "default effort for codex: low, medium, high, xhigh, max, ultra",
    },
    EnvVar {
        name: "STEPWISE_CLAUDE_MODEL",
        meaning: "default model for claude (default: the CLI's)",
    },
    EnvVar {
        name: "STEPWISE_CLAUDE_EFFORT",
        meaning: "default effort for claude: low, medium, high, xhigh, max",
    },
    EnvVar {
        name: "STEPWISE_GEMINI_MODEL",
        meaning: "default model for gemini (default: the CLI's)",
    },
    EnvVar {
        name: "STEPWISE_GEMINI_EFFORT",
        meaning: "default effort for gemini: low, medium, high",
    },
];

/// Model and effort used when a task names the runtime but not these.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeDefaults {
    pub model: Option<String>,
    pub effort: Option<String>,
}

/// Serializable so the server can hand them to the UI to prefill the submit form.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Defaults {
    pub runtime: RuntimeMode,
    pub publish_mode: PublishMode,
    pub codex: RuntimeDefaults,
    pub claude: RuntimeDefaults,
    pub gemini: RuntimeDefaults,
}

impl Defaults {
    pub fn for_runtime(&self, runtime: RuntimeMode) -> &RuntimeDefaults {
        match runtime {
            RuntimeMode::Codex => &self.codex,
            RuntimeMode::Claude => &self.claude,
            RuntimeMode::Gemini => &self.gemini,
        }
    }

    fn for_runtime_mut(&mut self, runtime: RuntimeMode) -> &mut RuntimeDefaults {
        match runtime {
            RuntimeMode::Codex => &mut self.codex,
            RuntimeMode::Claude => &mut self.claude,
            RuntimeMode::Gemini => &mut self.gemini,
        }
    }

    /// Reads the variables in [`ENV_VARS`] through `lookup` (e.g. `|k| std::env::var(k).ok()`),
    /// which keeps this crate free of I/O and lets tests pass a map.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Defaults, ConfigError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let mut defaults = Defaults {
            publish_mode: publish_mode(&get)?,
            ..Defaults::default()
        };
        if let Some(v) = get(RUNTIME_VAR) {
            defaults.runtime = v
                .parse()
                .map_err(|_| ConfigError::invalid(RUNTIME_VAR, &v, "codex, claude, gemini"))?;
        }
        for runtime in RuntimeMode::ALL {
            *defaults.for_runtime_mut(runtime) = runtime_defaults(runtime, &get)?;
        }
        Ok(defaults)
    }
}

fn publish_mode(get: &impl Fn(&str) -> Option<String>) -> Result<PublishMode, ConfigError> {
    let parse = |var: &'static str| -> Result<Option<(PublishMode, String)>, ConfigError> {
        let Some(v) = get(var) else { return Ok(None) };
        let mode = v
            .parse()
            .map_err(|_| ConfigError::invalid(var, &v, "none, branch, pr"))?;
        Ok(Some((mode, v)))
    };
    match (parse(PUBLISH_MODE_VAR)?, parse(PUBLISH_MODE_ALIAS_VAR)?) {
        (Some((mode, value)), Some((alias_mode, alias_value))) if mode != alias_mode => {
            Err(ConfigError::Conflict {
                variable: PUBLISH_MODE_VAR,
                value,
                alias: PUBLISH_MODE_ALIAS_VAR,
                alias_value,
            })
        }
        (Some((mode, _)), _) | (None, Some((mode, _))) => Ok(mode),
        (None, None) => Ok(PublishMode::default()),
    }
}

/// The (model, effort) variables of a runtime.
fn runtime_vars(runtime: RuntimeMode) -> (&'static str, &'static str) {
    match runtime {
        RuntimeMode::Codex => ("STEPWISE_CODEX_MODEL", "STEPWISE_CODEX_EFFORT"),
        RuntimeMode::Claude => ("STEPWISE_CLAUDE_MODEL", "STEPWISE_CLAUDE_EFFORT"),
        RuntimeMode::Gemini => ("STEPWISE_GEMINI_MODEL", "STEPWISE_GEMINI_EFFORT"),
    }
}

fn runtime_defaults(
    runtime: RuntimeMode,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<RuntimeDefaults, ConfigError> {
    let (model_var, effort_var) = runtime_vars(runtime);
    let model = get(model_var)
        .map(|m| match rules::model(&m) {
            Ok(()) => Ok(m),
            Err(_) => Err(ConfigError::invalid(model_var, &m, MODEL_ACCEPTED)),
        })
        .transpose()?;
    let effort = get(effort_var)
        .map(|e| {
            rules::effort(runtime, &e)
                .map_err(|_| ConfigError::invalid(effort_var, &e, &runtime.efforts().join(", ")))
        })
        .transpose()?;
    Ok(RuntimeDefaults { model, effort })
}

const MODEL_ACCEPTED: &str =
    "a model name without spaces or control characters, at most 200 characters";

/// A default read from the environment is unusable; the message names the variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    Invalid {
        variable: &'static str,
        value: String,
        accepted: String,
    },
    /// The variable and its alias are both set, to different values.
    Conflict {
        variable: &'static str,
        value: String,
        alias: &'static str,
        alias_value: String,
    },
}

impl ConfigError {
    fn invalid(variable: &'static str, value: &str, accepted: &str) -> Self {
        ConfigError::Invalid {
            variable,
            value: value.to_string(),
            accepted: accepted.to_string(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Invalid {
                variable,
                value,
                accepted,
            } => {
                write!(f, "{variable}={value:?} is not valid; accepted: {accepted}")
            }
            ConfigError::Conflict {
                variable,
                value,
                alias,
                alias_value,
            } => write!(
                f,
                "{variable}={value:?} and {alias}={alias_value:?} disagree; set only one of them, or both to the same value"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
