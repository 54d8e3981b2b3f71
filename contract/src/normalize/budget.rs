//! `task.budget`: each limit a positive number, a price only where the runtime reports one,
//! and the server's default price limit where a task sets none. The same reading checks
//! the body of `POST /api/queue/jobs/{id}/budget`.

use serde_json::Value;

use super::walk::{Walker, field, join};
use crate::budget::{JobBudget, priced};
use crate::defaults::Defaults;
use crate::error::FieldError;
use crate::modes::RuntimeMode;

const FIELDS: &[&str] = &["maxCostUsd", "maxTokens", "maxMinutes"];
/// Sanity bounds: a budget past these is a typo, not a plan.
const MAX_COST_USD: f64 = 1_000_000.0;
const MAX_TOKENS: i64 = 1_000_000_000_000;
const MAX_MINUTES: f64 = 525_600.0;

/// `task.budget` of a task run by `runtime`; `defaults.budget_usd` fills in `maxCostUsd`
/// where the runtime reports a price and the task sets none. `None` for no limit at all.
pub(super) fn task_budget(
    w: &mut Walker,
    v: Option<&Value>,
    runtime: RuntimeMode,
    defaults: &Defaults,
) -> Option<JobBudget> {
    let mut budget = match v {
        None | Some(Value::Null) => JobBudget::default(),
        Some(v) => read(w, v, "task.budget", runtime)?,
    };
    if budget.max_cost_usd.is_none() && priced(runtime) {
        budget.max_cost_usd = defaults.budget_usd;
    }
    Some(budget).filter(|b| !b.is_empty())
}

/// A budget given on its own (a raise), for a task run by `runtime`: paths are the bare
/// field names. An empty object is refused: it would lift every limit, which is said by
/// naming a large one instead.
pub fn budget(v: &Value, runtime: RuntimeMode) -> Result<JobBudget, Vec<FieldError>> {
    let mut w = Walker::default();
    let read = read(&mut w, v, "", runtime);
    match read {
        Some(budget) if w.errors.is_empty() && budget.is_empty() => Err(vec![FieldError::new(
            "",
            "give at least one of maxCostUsd, maxTokens, maxMinutes",
        )]),
        Some(budget) if w.errors.is_empty() => Ok(budget),
        _ => Err(w.errors),
    }
}

fn read(w: &mut Walker, v: &Value, path: &str, runtime: RuntimeMode) -> Option<JobBudget> {
    let map = w.object(v, if path.is_empty() { "budget" } else { path })?;
    w.reject_unknown(map, path, FIELDS);
    let at = |key: &str| join(path, key);
    let positive = |w: &mut Walker, key: &str, max: f64| -> Option<f64> {
        let v = field(map, key).filter(|v| !v.is_null())?;
        let path = at(key);
        match v.as_f64() {
            Some(n) if n > 0.0 && n <= max => Some(n),
            Some(_) => {
                w.error(path, format!("must be more than 0 and at most {max}"));
                None
            }
            None => {
                w.expected(path, "a number", v);
                None
            }
        }
    };
    let max_cost_usd = positive(w, "maxCostUsd", MAX_COST_USD);
    if max_cost_usd.is_some() && !priced(runtime) {
        w.error(
            at("maxCostUsd"),
            format!(
                "{runtime} reports no price for its turns, so a cost limit would never be \
                 reached; limit maxTokens or maxMinutes instead"
            ),
        );
    }
    let max_tokens = field(map, "maxTokens")
        .filter(|v| !v.is_null())
        .and_then(|v| {
            let path = at("maxTokens");
            let n = w.integer(v, &path).ok()?;
            if (1..=MAX_TOKENS).contains(&n) {
                Some(n as u64)
            } else {
                w.error(path, format!("must be between 1 and {MAX_TOKENS}"));
                None
            }
        });
    let max_minutes = positive(w, "maxMinutes", MAX_MINUTES);
    Some(JobBudget {
        max_cost_usd,
        max_tokens,
        max_minutes,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn paths(result: Result<JobBudget, Vec<FieldError>>) -> Vec<String> {
        result.unwrap_err().into_iter().map(|e| e.path).collect()
    }

    #[test]
    fn a_budget_takes_positive_limits_and_names_each_field_it_refuses() {
        let ok = budget(
            &json!({ "maxCostUsd": 2.5, "maxTokens": 900, "maxMinutes": 0.25 }),
            RuntimeMode::Claude,
        )
        .unwrap();
        assert_eq!(
            (ok.max_cost_usd, ok.max_tokens, ok.max_minutes),
            (Some(2.5), Some(900), Some(0.25))
        );
        assert_eq!(
            paths(budget(
                &json!({ "maxCostUsd": -1, "maxTokens": 1.5, "maxMinutes": "ten", "cap": 1 }),
                RuntimeMode::Claude
            )),
            ["cap", "maxCostUsd", "maxTokens", "maxMinutes"]
        );
        assert_eq!(paths(budget(&json!({}), RuntimeMode::Codex)), [""]);
        assert_eq!(paths(budget(&json!([1]), RuntimeMode::Codex)), ["budget"]);
    }

    #[test]
    fn a_price_limit_is_refused_where_the_cli_reports_no_price() {
        let refused = budget(&json!({ "maxCostUsd": 1 }), RuntimeMode::Codex).unwrap_err();
        assert_eq!(refused[0].path, "maxCostUsd");
        assert!(
            refused[0].message.contains("maxTokens"),
            "{}",
            refused[0].message
        );
    }

    #[test]
    fn the_server_s_default_price_limit_applies_where_a_price_is_reported() {
        let defaults = Defaults {
            budget_usd: Some(5.0),
            ..Defaults::default()
        };
        let mut w = Walker::default();
        let claude = task_budget(&mut w, None, RuntimeMode::Claude, &defaults).unwrap();
        assert_eq!(claude.max_cost_usd, Some(5.0));
        let own = task_budget(
            &mut w,
            Some(&json!({ "maxCostUsd": 1 })),
            RuntimeMode::Claude,
            &defaults,
        );
        assert_eq!(own.unwrap().max_cost_usd, Some(1.0));
        assert_eq!(
            task_budget(&mut w, None, RuntimeMode::Codex, &defaults),
            None
        );
        let tokens = task_budget(
            &mut w,
            Some(&json!({ "maxTokens": 10 })),
            RuntimeMode::Gemini,
            &defaults,
        );
        assert_eq!(tokens.unwrap().max_cost_usd, None);
        assert!(w.errors.is_empty(), "{:?}", w.errors);
    }
}
