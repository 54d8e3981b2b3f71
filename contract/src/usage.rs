//! What agents used: a step's `usage` as its CLI reported it, and the totals a job keeps.
//! A figure no CLI reported stays absent all the way to the page: the queue never
//! estimates tokens and never prices them.

use serde::{Deserialize, Serialize};

/// What one step's agent invocation used, as its CLI reported it: the `usage` of
/// `task.step.finished`, and of `task.step.failed` when the CLI got as far as saying.
/// A figure the CLI does not report is absent, never estimated; only claude reports a
/// price. Each step is one invocation, so these are that invocation's totals. A job's
/// `usage` is the same shape, summed over its steps.
///
/// `inputTokens` counts every input token, those read from a prompt cache included;
/// `cachedInputTokens` says how many of them were. `reasoningTokens` are part of
/// `outputTokens` where the API counts them so (OpenAI), and beside them where it does
/// not (Gemini's thoughts).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepUsage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// How long the agent ran, in milliseconds, as the worker timed it (not the CLI): what
    /// a budget's `maxMinutes` counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl StepUsage {
    /// Whether the CLI reported nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == StepUsage::default()
    }

    /// Every reported figure, for a job's or a step's detail (the CLI's `jobs show`, the
    /// job page): `1,210 in (300 cached) · 51 out (12 reasoning) · $0.75`. Empty when
    /// nothing was reported. One wording, so the terminal and the pages agree.
    pub fn summary(&self) -> String {
        let with = |n: u64, unit: &str, part: Option<u64>, what: &str| match part {
            Some(p) => format!("{} {unit} ({} {what})", grouped(n), grouped(p)),
            None => format!("{} {unit}", grouped(n)),
        };
        let mut parts = Vec::new();
        match self.input_tokens {
            Some(n) => parts.push(with(n, "in", self.cached_input_tokens, "cached")),
            None => parts.extend(
                self.cached_input_tokens
                    .map(|c| format!("{} cached in", grouped(c))),
            ),
        }
        match self.output_tokens {
            Some(n) => parts.push(with(n, "out", self.reasoning_tokens, "reasoning")),
            None => parts.extend(
                self.reasoning_tokens
                    .map(|r| format!("{} reasoning", grouped(r))),
            ),
        }
        parts.extend(self.cost_usd.map(dollars));
        parts.extend(
            self.duration_ms
                .map(|ms| format!("{} of agent time", duration(ms))),
        );
        parts.join(" · ")
    }

    /// The figures a list has room for: `1.2k in · 51 out · $0.75`. Empty when nothing
    /// was reported.
    pub fn compact(&self) -> String {
        [
            self.input_tokens.map(|n| format!("{} in", short(n))),
            self.output_tokens.map(|n| format!("{} out", short(n))),
            self.cost_usd.map(dollars),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" · ")
    }
}

/// `45s`, `3m 07s`, `2h 05m`.
fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

/// `1,234,567`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `950`, `1.2k`, `3.4M`.
fn short(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_949 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// `$0.75`, `$0.0123` (a step often costs cents or less), `$12.35`.
fn dollars(usd: f64) -> String {
    if usd >= 1.0 {
        return format!("${usd:.2}");
    }
    let mut text = format!("{usd:.4}");
    while text.ends_with('0') && text.len() > "0.00".len() {
        text.pop();
    }
    format!("${text}")
}

/// The sum of two reports (of one step's turns, or of a job's steps); a figure stays
/// absent only when both lack it. Token counts saturate rather than wrap: a hostile or
/// broken report must not turn a job's totals small again (or panic a debug build).
impl StepUsage {
    /// What was used since `earlier`, of a total that includes it: a CLI that continues a
    /// session reports the session's totals so far (codex, claude), not the run's.
    pub fn since(&self, earlier: &StepUsage) -> StepUsage {
        let tokens = |now: Option<u64>, then: Option<u64>| match (now, then) {
            (Some(now), Some(then)) => Some(now.saturating_sub(then)),
            (now, _) => now,
        };
        StepUsage {
            input_tokens: tokens(self.input_tokens, earlier.input_tokens),
            cached_input_tokens: tokens(self.cached_input_tokens, earlier.cached_input_tokens),
            output_tokens: tokens(self.output_tokens, earlier.output_tokens),
            reasoning_tokens: tokens(self.reasoning_tokens, earlier.reasoning_tokens),
            cost_usd: match (self.cost_usd, earlier.cost_usd) {
                (Some(now), Some(then)) => Some((now - then).max(0.0)),
                (now, _) => now,
            },
            duration_ms: tokens(self.duration_ms, earlier.duration_ms),
        }
    }
}

impl std::ops::Add for StepUsage {
    type Output = StepUsage;

    fn add(self, other: StepUsage) -> StepUsage {
        fn sum<T>(a: Option<T>, b: Option<T>, add: impl Fn(T, T) -> T) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(add(a, b)),
                (a, b) => a.or(b),
            }
        }
        let tokens = |a, b| sum(a, b, u64::saturating_add);
        StepUsage {
            input_tokens: tokens(self.input_tokens, other.input_tokens),
            cached_input_tokens: tokens(self.cached_input_tokens, other.cached_input_tokens),
            output_tokens: tokens(self.output_tokens, other.output_tokens),
            reasoning_tokens: tokens(self.reasoning_tokens, other.reasoning_tokens),
            cost_usd: sum(self.cost_usd, other.cost_usd, |a, b| a + b),
            duration_ms: tokens(self.duration_ms, other.duration_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_session_s_totals_less_the_earlier_ones_are_what_a_run_used() {
        let earlier = super::StepUsage {
            input_tokens: Some(2030),
            output_tokens: Some(83),
            cost_usd: Some(0.5),
            ..Default::default()
        };
        let total = super::StepUsage {
            input_tokens: Some(4120),
            cached_input_tokens: Some(812),
            output_tokens: Some(172),
            cost_usd: Some(0.25),
            ..Default::default()
        };
        assert_eq!(
            total.since(&earlier),
            super::StepUsage {
                input_tokens: Some(2090),
                cached_input_tokens: Some(812),
                output_tokens: Some(89),
                cost_usd: Some(0.0),
                ..Default::default()
            }
        );
        assert_eq!(total.since(&super::StepUsage::default()), total);
    }

    use super::*;

    #[test]
    fn step_usage_leaves_out_what_was_not_reported_and_adds_up() {
        let codex = StepUsage {
            input_tokens: Some(1200),
            cached_input_tokens: Some(300),
            output_tokens: Some(45),
            reasoning_tokens: Some(12),
            cost_usd: None,
            duration_ms: None,
        };
        assert_eq!(
            serde_json::to_value(codex).unwrap(),
            json!({ "inputTokens": 1200, "cachedInputTokens": 300, "outputTokens": 45, "reasoningTokens": 12 })
        );
        let priced = StepUsage {
            input_tokens: Some(10),
            cost_usd: Some(0.25),
            ..StepUsage::default()
        };
        let total = codex + priced;
        assert_eq!(total.input_tokens, Some(1210));
        assert_eq!(total.cached_input_tokens, Some(300));
        assert_eq!(total.cost_usd, Some(0.25));
        assert!(StepUsage::default().is_empty() && !total.is_empty());
        let back: StepUsage = serde_json::from_value(json!({ "outputTokens": 3 })).unwrap();
        assert_eq!(back.output_tokens, Some(3));
        assert_eq!(back.input_tokens, None);
    }

    #[test]
    fn token_totals_saturate_instead_of_wrapping() {
        let huge = StepUsage {
            output_tokens: Some(u64::MAX - 1),
            ..StepUsage::default()
        };
        assert_eq!((huge + huge).output_tokens, Some(u64::MAX));
    }

    #[test]
    fn usage_reads_in_full_or_in_brief_and_says_nothing_when_nothing_was_reported() {
        let all = StepUsage {
            input_tokens: Some(1_234_567),
            cached_input_tokens: Some(300),
            output_tokens: Some(51),
            reasoning_tokens: Some(12),
            cost_usd: Some(0.25),
            duration_ms: Some(187_400),
        };
        assert_eq!(
            all.summary(),
            "1,234,567 in (300 cached) · 51 out (12 reasoning) · $0.25 · 3m 07s of agent time"
        );
        assert_eq!(all.compact(), "1.2M in · 51 out · $0.25");
        let codex = StepUsage {
            input_tokens: Some(1200),
            output_tokens: Some(45),
            ..StepUsage::default()
        };
        assert_eq!(codex.summary(), "1,200 in · 45 out");
        assert_eq!(codex.compact(), "1.2k in · 45 out");
        let cents = StepUsage {
            cost_usd: Some(0.0123),
            ..StepUsage::default()
        };
        assert_eq!(cents.summary(), "$0.0123");
        assert_eq!(
            StepUsage {
                cost_usd: Some(12.345),
                ..cents
            }
            .compact(),
            "$12.35"
        );
        assert_eq!(
            StepUsage {
                cost_usd: Some(0.5),
                ..cents
            }
            .compact(),
            "$0.50"
        );
        assert_eq!(StepUsage::default().summary(), "");
        assert_eq!(StepUsage::default().compact(), "");
        assert_eq!(short(999_999), "1.0M");
    }

    #[test]
    fn a_job_from_before_usage_was_kept_still_reads() {
        let job: crate::Job = serde_json::from_value(json!({
            "id": "0190a000-0000-7000-8000-000000000001", "type": "task", "status": "queued", "priority": 0,
            "payload": {}, "requiredCapabilities": [], "attempt": 0,
            "maxAttempts": 3, "nextAttemptAt": "2026-01-01T00:00:00Z",
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        assert_eq!(job.usage, None);
    }
}
