//! A job's budget (`task.budget`): what it may spend over its whole life, every step,
//! iteration, attempt and round, counted from the `usage` its steps report. The queue and
//! the worker both ask [`JobBudget::overrun`] of the same totals, so they agree on when it
//! is spent: the queue to ask the job to pause, the worker not to start more work meanwhile.

use serde::{Deserialize, Serialize};

use crate::usage::StepUsage;

/// Each limit is optional; a budget with none limits nothing.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobBudget {
    /// US dollars, as the CLI prices its turns (claude does; codex and gemini report no
    /// price, so their tasks budget tokens or minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Input and output tokens together (cached input counts, being input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Minutes of the agent's own running time (its steps and iterations), fractions
    /// allowed. Reached mid-step, the step is stopped at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_minutes: Option<f64>,
}

/// The limit a budget was spent on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BudgetLimit {
    #[serde(rename = "maxCostUsd")]
    CostUsd,
    #[serde(rename = "maxTokens")]
    Tokens,
    #[serde(rename = "maxMinutes")]
    Minutes,
}

crate::wire_names!(BudgetLimit, "budget limit", exact {
    CostUsd = "maxCostUsd",
    Tokens = "maxTokens",
    Minutes = "maxMinutes",
});

/// A limit reached: how much of it was spent, in its own unit (dollars, tokens, minutes).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overrun {
    pub limit: BudgetLimit,
    pub spent: f64,
    pub max: f64,
}

impl Overrun {
    /// `$1.02 of $1.00`, `12,400 of 10,000 tokens`, `2.1 of 2 minutes`.
    pub fn describe(&self) -> String {
        match self.limit {
            BudgetLimit::CostUsd => format!("${:.2} of ${:.2}", self.spent, self.max),
            BudgetLimit::Tokens => format!(
                "{} of {} tokens",
                crate::usage::grouped(self.spent as u64),
                crate::usage::grouped(self.max as u64)
            ),
            BudgetLimit::Minutes => {
                format!("{} of {} minutes", minutes(self.spent), minutes(self.max))
            }
        }
    }
}

fn minutes(n: f64) -> String {
    let text = format!("{n:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Whether `runtime`'s CLI reports what its turns cost, so a price limit can be reached.
pub fn priced(runtime: crate::modes::RuntimeMode) -> bool {
    runtime == crate::modes::RuntimeMode::Claude
}

/// The tokens a budget counts of `usage`: input and output.
pub fn tokens(usage: &StepUsage) -> u64 {
    usage
        .input_tokens
        .unwrap_or(0)
        .saturating_add(usage.output_tokens.unwrap_or(0))
}

/// The agent's running time in `usage`, in minutes.
pub fn agent_minutes(usage: &StepUsage) -> f64 {
    usage.duration_ms.unwrap_or(0) as f64 / 60_000.0
}

impl JobBudget {
    pub fn is_empty(&self) -> bool {
        *self == JobBudget::default()
    }

    /// The first limit `spent` has reached, minutes first (they stop a step at once), then
    /// cost, then tokens; `None` while every limit has some left.
    pub fn overrun(&self, spent: &StepUsage) -> Option<Overrun> {
        let reached = |limit, spent: f64, max: Option<f64>| {
            max.filter(|&max| spent >= max)
                .map(|max| Overrun { limit, spent, max })
        };
        reached(BudgetLimit::Minutes, agent_minutes(spent), self.max_minutes)
            .or_else(|| {
                reached(
                    BudgetLimit::CostUsd,
                    spent.cost_usd.unwrap_or(0.0),
                    self.max_cost_usd,
                )
            })
            .or_else(|| {
                reached(
                    BudgetLimit::Tokens,
                    tokens(spent) as f64,
                    self.max_tokens.map(|n| n as f64),
                )
            })
    }

    /// How much agent time is left before `maxMinutes`, when the budget has one.
    pub fn time_left(&self, spent: &StepUsage) -> Option<std::time::Duration> {
        let max = self.max_minutes?;
        let left_ms = (max * 60_000.0 - spent.duration_ms.unwrap_or(0) as f64).max(0.0);
        Some(std::time::Duration::from_millis(left_ms as u64))
    }

    /// Each limit with what `spent` used of it: `$0.40 of $1.00 · 3,100 of 10,000 tokens`.
    pub fn summary(&self, spent: &StepUsage) -> String {
        let mut parts = Vec::new();
        if let Some(max) = self.max_cost_usd {
            let spent = spent.cost_usd.unwrap_or(0.0);
            parts.push(
                Overrun {
                    limit: BudgetLimit::CostUsd,
                    spent,
                    max,
                }
                .describe(),
            );
        }
        if let Some(max) = self.max_tokens {
            let spent = tokens(spent) as f64;
            let max = max as f64;
            parts.push(
                Overrun {
                    limit: BudgetLimit::Tokens,
                    spent,
                    max,
                }
                .describe(),
            );
        }
        if let Some(max) = self.max_minutes {
            let spent = agent_minutes(spent);
            parts.push(
                Overrun {
                    limit: BudgetLimit::Minutes,
                    spent,
                    max,
                }
                .describe(),
            );
        }
        parts.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(cost: f64, input: u64, output: u64, ms: u64) -> StepUsage {
        StepUsage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cost_usd: Some(cost),
            duration_ms: Some(ms),
            ..StepUsage::default()
        }
    }

    #[test]
    fn a_budget_is_spent_when_a_limit_is_reached_and_minutes_are_told_first() {
        let budget = JobBudget {
            max_cost_usd: Some(1.0),
            max_tokens: Some(1000),
            max_minutes: Some(2.0),
        };
        assert_eq!(budget.overrun(&used(0.99, 500, 499, 119_999)), None);
        let cost = budget.overrun(&used(1.0, 10, 10, 0)).unwrap();
        assert_eq!(
            (cost.limit, cost.spent, cost.max),
            (BudgetLimit::CostUsd, 1.0, 1.0)
        );
        let tokens = budget.overrun(&used(0.0, 600, 400, 0)).unwrap();
        assert_eq!(tokens.limit, BudgetLimit::Tokens);
        assert_eq!(tokens.describe(), "1,000 of 1,000 tokens");
        let all = budget.overrun(&used(5.0, 5000, 0, 150_000)).unwrap();
        assert_eq!(all.limit, BudgetLimit::Minutes);
        assert_eq!(all.describe(), "2.5 of 2 minutes");
        assert_eq!(JobBudget::default().overrun(&used(9.0, 9, 9, 9)), None);
    }

    #[test]
    fn a_figure_no_cli_reported_counts_as_nothing_spent() {
        let budget = JobBudget {
            max_cost_usd: Some(0.5),
            ..JobBudget::default()
        };
        assert_eq!(budget.overrun(&StepUsage::default()), None);
        assert_eq!(budget.summary(&StepUsage::default()), "$0.00 of $0.50");
    }

    #[test]
    fn the_time_left_counts_down_the_agent_s_minutes() {
        let budget = JobBudget {
            max_minutes: Some(0.5),
            ..JobBudget::default()
        };
        let left = budget.time_left(&used(0.0, 0, 0, 10_000)).unwrap();
        assert_eq!(left.as_millis(), 20_000);
        assert_eq!(
            budget
                .time_left(&used(0.0, 0, 0, 40_000))
                .unwrap()
                .as_millis(),
            0
        );
        assert_eq!(JobBudget::default().time_left(&StepUsage::default()), None);
    }

    #[test]
    fn a_budget_reads_and_writes_its_wire_names() {
        let budget: JobBudget =
            serde_json::from_str(r#"{"maxCostUsd": 2.5, "maxTokens": 100, "maxMinutes": 0.5}"#)
                .unwrap();
        assert_eq!(budget.max_tokens, Some(100));
        assert_eq!(
            serde_json::to_value(JobBudget {
                max_tokens: Some(7),
                ..JobBudget::default()
            })
            .unwrap(),
            serde_json::json!({ "maxTokens": 7 })
        );
        assert!(serde_json::from_str::<JobBudget>(r#"{"maxDollars": 1}"#).is_err());
        assert_eq!(BudgetLimit::Minutes.as_str(), "maxMinutes");
    }
}
