//! `stepwise serve`'s task defaults: what a task that leaves out its runtime, model, effort
//! or publish mode gets. Each is a flag with its variable; the variable names are a contract
//! with existing deployments (MOONMIND_DEFAULT_PUBLISH_MODE comes from the seeds).
//!
//! A blank value is unset, and anything else must be valid or the server does not start:
//! a typo in a deployment's environment would otherwise quietly change what every task
//! does (open pull requests nobody asked for, say).

use std::ffi::OsStr;
use std::str::FromStr;
use std::sync::Arc;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{Arg, Args, Command};
use contract::{Defaults, ParseModeError, PublishMode, RuntimeDefaults, RuntimeMode, rules};

use super::error::ConfigError;

#[derive(Debug, Clone, Args)]
pub struct DefaultsArgs {
    /// What a task that names no publish mode does with its changes [default: pr].
    /// MOONMIND_DEFAULT_PUBLISH_MODE is read as an alias; if both are set they must agree.
    #[arg(
        long,
        env = "STEPWISE_DEFAULT_PUBLISH_MODE",
        value_name = "MODE",
        value_parser = mode::<PublishMode>(&PublishMode::NAMES)
    )]
    default_publish_mode: Option<Given<PublishMode>>,
    // Only its variable is meant to be used; clap needs a flag for an argument that is not
    // positional, so it has a hidden one.
    #[arg(
        long,
        env = "MOONMIND_DEFAULT_PUBLISH_MODE",
        value_name = "MODE",
        value_parser = mode::<PublishMode>(&PublishMode::NAMES),
        hide = true
    )]
    moonmind_default_publish_mode: Option<Given<PublishMode>>,
    /// Every task that does not say otherwise (`task.publish.approval: "none"`) stops
    /// after its steps until an operator approves it, before anything is published.
    #[arg(
        long,
        env = "STEPWISE_REQUIRE_APPROVAL",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = switch()
    )]
    require_approval: Option<Given<bool>>,
    /// The agent CLI of a task that names no runtime [default: codex].
    #[arg(
        long,
        env = "STEPWISE_DEFAULT_RUNTIME",
        value_name = "RUNTIME",
        value_parser = mode::<RuntimeMode>(&RuntimeMode::NAMES)
    )]
    default_runtime: Option<Given<RuntimeMode>>,
    /// The model of a codex task that names none [default: the CLI's own].
    #[arg(
        long,
        env = "STEPWISE_CODEX_MODEL",
        value_name = "MODEL",
        value_parser = model()
    )]
    codex_model: Option<Given<String>>,
    /// The effort of a codex task that names none [default: the CLI's own].
    #[arg(
        long,
        env = "STEPWISE_CODEX_EFFORT",
        value_name = "EFFORT",
        value_parser = effort(RuntimeMode::Codex)
    )]
    codex_effort: Option<Given<String>>,
    /// The model of a claude task that names none [default: the CLI's own].
    #[arg(
        long,
        env = "STEPWISE_CLAUDE_MODEL",
        value_name = "MODEL",
        value_parser = model()
    )]
    claude_model: Option<Given<String>>,
    /// The effort of a claude task that names none [default: the CLI's own].
    #[arg(
        long,
        env = "STEPWISE_CLAUDE_EFFORT",
        value_name = "EFFORT",
        value_parser = effort(RuntimeMode::Claude)
    )]
    claude_effort: Option<Given<String>>,
    /// The model of a gemini task that names none [default: the CLI's own].
    #[arg(
        long,
        env = "STEPWISE_GEMINI_MODEL",
        value_name = "MODEL",
        value_parser = model()
    )]
    gemini_model: Option<Given<String>>,
    /// The effort of a gemini task that names none [default: the CLI's own].
    #[arg(
        long,
        env = "STEPWISE_GEMINI_EFFORT",
        value_name = "EFFORT",
        value_parser = effort(RuntimeMode::Gemini)
    )]
    gemini_effort: Option<Given<String>>,
    /// The price limit, in US dollars, of a task that sets no `task.budget.maxCostUsd`,
    /// where its runtime reports a price (claude): reached, the job pauses for an operator
    /// to raise it [default: none].
    #[arg(
        long,
        env = "STEPWISE_DEFAULT_BUDGET_USD",
        value_name = "USD",
        value_parser = dollars()
    )]
    default_budget_usd: Option<Given<f64>>,
}

impl DefaultsArgs {
    /// The defaults these flags and variables make; the publish mode and its alias must agree.
    pub fn resolve(self) -> Result<Defaults, ConfigError> {
        let publish_mode = match (
            self.default_publish_mode.and_then(Given::set),
            self.moonmind_default_publish_mode.and_then(Given::set),
        ) {
            (Some((mode, from)), Some((alias_mode, alias_from))) if mode != alias_mode => {
                return Err(ConfigError::PublishModeConflict {
                    from,
                    value: mode.to_string(),
                    alias_from,
                    alias_value: alias_mode.to_string(),
                });
            }
            (Some((mode, _)), _) | (None, Some((mode, _))) => mode,
            (None, None) => PublishMode::default(),
        };
        let runtime_defaults =
            |model: Option<Given<String>>, effort: Option<Given<String>>| RuntimeDefaults {
                model: model.and_then(|g| g.value),
                effort: effort.and_then(|g| g.value),
            };
        Ok(Defaults {
            runtime: self
                .default_runtime
                .and_then(|g| g.value)
                .unwrap_or_default(),
            publish_mode,
            approval_required: self.require_approval.and_then(|g| g.value).unwrap_or(false),
            codex: runtime_defaults(self.codex_model, self.codex_effort),
            claude: runtime_defaults(self.claude_model, self.claude_effort),
            gemini: runtime_defaults(self.gemini_model, self.gemini_effort),
            budget_usd: self.default_budget_usd.and_then(|g| g.value),
        })
    }

    /// These flags alone, whatever the environment holds: what the tests' servers start with.
    #[cfg(any(test, feature = "testing"))]
    pub fn from_flags(flags: &[&str]) -> Result<DefaultsArgs, clap::Error> {
        use clap::FromArgMatches;
        let command = DefaultsArgs::augment_args(Command::new("stepwise"))
            .mut_args(|arg| arg.env(None::<&'static str>));
        let matches = command
            .try_get_matches_from(std::iter::once("stepwise").chain(flags.iter().copied()))?;
        DefaultsArgs::from_arg_matches(&matches)
    }
}

/// One task default as clap parsed it. Blank (`NAME=` in an env file) is unset, as it
/// always was; clap itself would hand the empty string to the parser as a value.
#[derive(Debug, Clone)]
struct Given<T> {
    value: Option<T>,
    /// The variable or the flag it came from, for an error to point at.
    from: String,
}

impl<T> Given<T> {
    fn set(self) -> Option<(T, String)> {
        Some((self.value?, self.from))
    }
}

type Check<T> = Arc<dyn Fn(&str) -> Result<T, String> + Send + Sync>;

/// Trims, reads blank as unset and checks the rest with the contract's own rule, so a
/// default is held to what a task's field is.
#[derive(Clone)]
struct DefaultParser<T> {
    check: Check<T>,
    /// The values to list in help and errors; empty for free text (a model).
    accepted: &'static [&'static str],
}

/// A closed vocabulary, read in any case as the contract reads it.
fn mode<M>(names: &'static [&'static str]) -> DefaultParser<M>
where
    M: FromStr<Err = ParseModeError> + 'static,
{
    DefaultParser {
        check: Arc::new(|v| v.parse().map_err(|e: ParseModeError| e.to_string())),
        accepted: names,
    }
}

/// `true` or `false`, in any case.
fn switch() -> DefaultParser<bool> {
    DefaultParser {
        check: Arc::new(|v| match v.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("use true or false".to_string()),
        }),
        accepted: &["true", "false"],
    }
}

fn model() -> DefaultParser<String> {
    DefaultParser {
        check: Arc::new(|v| rules::model(v).map(|()| v.to_string())),
        accepted: &[],
    }
}

/// A price limit: what `task.budget.maxCostUsd` takes.
fn dollars() -> DefaultParser<f64> {
    DefaultParser {
        check: Arc::new(|v| {
            let budget = serde_json::json!({ "maxCostUsd": v.parse::<f64>().map_err(|_| format!("{v:?} is not a number of dollars"))? });
            contract::normalize::budget(&budget, RuntimeMode::Claude)
                .map(|b| b.max_cost_usd.unwrap_or_default())
                .map_err(|errors| {
                    errors
                        .iter()
                        .map(|e| e.message.clone())
                        .collect::<Vec<_>>()
                        .join("; ")
                })
        }),
        accepted: &[],
    }
}

/// Each runtime's CLI takes its own effort levels.
fn effort(runtime: RuntimeMode) -> DefaultParser<String> {
    DefaultParser {
        check: Arc::new(move |v| rules::effort(runtime, v)),
        accepted: runtime.efforts(),
    }
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for DefaultParser<T> {
    type Value = Given<T>;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<Given<T>, clap::Error> {
        self.parse_ref_(cmd, arg, value, ValueSource::CommandLine)
    }

    fn parse_ref_(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
        source: ValueSource,
    ) -> Result<Given<T>, clap::Error> {
        // Named as the operator wrote it: clap would name the flag even for a variable.
        let from = match (
            source,
            arg.and_then(Arg::get_env),
            arg.and_then(Arg::get_long),
        ) {
            (ValueSource::EnvVariable, Some(name), _) => name.to_string_lossy().into_owned(),
            (_, _, Some(long)) => format!("--{long}"),
            _ => String::new(),
        };
        let Some(text) = value.to_str() else {
            return Err(clap::Error::new(ErrorKind::InvalidUtf8).with_cmd(cmd));
        };
        let text = text.trim();
        if text.is_empty() {
            return Ok(Given { value: None, from });
        }
        let reason = match (self.check)(text) {
            Ok(value) => {
                return Ok(Given {
                    value: Some(value),
                    from,
                });
            }
            Err(reason) => reason,
        };
        if self.accepted.is_empty() {
            return Err(clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("invalid value '{text}' for '{from}': {reason}\n"),
            )
            .with_cmd(cmd));
        }
        let mut err = clap::Error::new(ErrorKind::InvalidValue).with_cmd(cmd);
        err.insert(ContextKind::InvalidArg, ContextValue::String(from));
        err.insert(ContextKind::InvalidValue, ContextValue::String(text.into()));
        err.insert(
            ContextKind::ValidValue,
            ContextValue::Strings(self.accepted.iter().map(|v| v.to_string()).collect()),
        );
        Err(err)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        if self.accepted.is_empty() {
            return None;
        }
        Some(Box::new(self.accepted.iter().map(PossibleValue::new)))
    }
}
