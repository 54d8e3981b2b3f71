//! `stepwise serve`'s retention flags: how long a finished job keeps its log lines, its
//! events and artifacts, and its row (see `queue::Retention`).

use std::time::Duration;

use clap::Args;
use queue::RetentionConfig;

/// How long finished jobs keep what they stored.
#[derive(Debug, Clone, Args)]
pub struct RetentionArgs {
    /// A finished job's log lines are deleted this long after it ended, those of each step
    /// whose log file (an artifact) holds them. AGE: `30d`, `12h`, `90m`, `45s` or `forever`.
    #[arg(long, env = "STEPWISE_KEEP_LOGS", default_value = "1d", value_name = "AGE", value_parser = age)]
    pub keep_logs: Keep,
    /// A finished job's events and artifacts are deleted this long after it ended; one event
    /// stays to say so.
    #[arg(long, env = "STEPWISE_KEEP_HISTORY", default_value = "30d", value_name = "AGE", value_parser = age)]
    pub keep_history: Keep,
    /// A finished job's row (its line in the jobs list) is deleted this long after it ended,
    /// with its history.
    #[arg(long, env = "STEPWISE_KEEP_JOBS", default_value = "forever", value_name = "AGE", value_parser = age)]
    pub keep_jobs: Keep,
}

/// An age, or `forever`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep(pub Option<Duration>);

impl RetentionArgs {
    pub fn config(&self) -> RetentionConfig {
        RetentionConfig {
            logs_after: self.keep_logs.0,
            history_after: self.keep_history.0,
            jobs_after: self.keep_jobs.0,
            ..RetentionConfig::default()
        }
    }
}

impl Default for RetentionArgs {
    /// As if no flag were given.
    fn default() -> Self {
        let defaults = RetentionConfig::default();
        RetentionArgs {
            keep_logs: Keep(defaults.logs_after),
            keep_history: Keep(defaults.history_after),
            keep_jobs: Keep(defaults.jobs_after),
        }
    }
}

/// Clap names the flag and the value around this message.
fn age(text: &str) -> Result<Keep, String> {
    const FORMS: &str = "a whole number with d, h, m or s (30d, 12h, 90m, 45s), or forever";
    let text = text.trim();
    if text == "forever" {
        return Ok(Keep(None));
    }
    let unit = text.chars().last().unwrap_or(' ');
    let seconds = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return Err(format!("expected {FORMS}")),
    };
    let n: u64 = text[..text.len() - 1]
        .parse()
        .map_err(|_| format!("expected {FORMS}"))?;
    // A century is longer than anything a store keeps; past it a date could overflow.
    const MAX_SECONDS: u64 = 100 * 365 * 86_400;
    match n.checked_mul(seconds) {
        Some(total) if total <= MAX_SECONDS => Ok(Keep(Some(Duration::from_secs(total)))),
        _ => Err("at most 36500d; for no limit say forever".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_is_a_number_and_a_unit_or_forever() {
        let secs = |t: &str| age(t).unwrap().0.map(|d| d.as_secs());
        assert_eq!(secs("30d"), Some(30 * 86_400));
        assert_eq!(secs("12h"), Some(12 * 3_600));
        assert_eq!(secs("90m"), Some(5_400));
        assert_eq!(secs("0s"), Some(0));
        assert_eq!(secs("forever"), None);
        for bad in [
            "",
            "d",
            "30",
            "30 d",
            "-1d",
            "1.5d",
            "30w",
            "forever!",
            "99999999999999d",
        ] {
            let err = age(bad).unwrap_err();
            assert!(err.contains("forever"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_defaults_keep_logs_a_day_history_thirty_days_and_rows_forever() {
        let config = RetentionArgs::default().config();
        assert_eq!(config, RetentionConfig::default());
        assert_eq!(config.logs_after, Some(Duration::from_secs(86_400)));
        assert_eq!(config.history_after, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(config.jobs_after, None);
    }
}
