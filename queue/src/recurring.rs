//! Recurring tasks: a cron line read in an IANA time zone (`Cadence`, pure), and the
//! scheduler every replica runs (River's shape: a config with defaults, `new`,
//! `start(stop)`, a testable `run_once`). A pass leases the schedules that are due, queues
//! the job of each one's latest due slot (one job per slot however many replicas pass: the
//! slot is the job's source, unique among jobs), and moves the schedule to its next slot.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Queue;
use crate::every::every;

/// A cron line in a time zone.
#[derive(Debug, Clone)]
pub struct Cadence {
    cron: croner::Cron,
    tz: Tz,
}

impl Cadence {
    /// The cadence of `cron` in `timezone`; each problem named by its field.
    pub fn parse(cron: &str, timezone: &str) -> Result<Cadence, Vec<(&'static str, String)>> {
        let mut problems = Vec::new();
        let fields = cron.split_whitespace().count();
        let parsed = if cron.trim().starts_with('@') || fields == 5 {
            cron.trim()
                .parse::<croner::Cron>()
                .map_err(|e| format!("not a cron line: {e}"))
        } else {
            Err(format!(
                "five fields (minute hour day-of-month month day-of-week), as \"0 6 * * 1\"; it has {fields}"
            ))
        };
        let tz = time_zone(timezone);
        match (parsed, tz) {
            (Ok(cron), Ok(tz)) => {
                let cadence = Cadence { cron, tz };
                if cadence.next_after(Utc::now()).is_none() {
                    problems.push(("cron", "never comes (a day no month has?)".to_string()));
                    return Err(problems);
                }
                Ok(cadence)
            }
            (cron, tz) => {
                problems.extend(cron.err().map(|e| ("cron", e)));
                problems.extend(tz.err().map(|e| ("timezone", e)));
                Err(problems)
            }
        }
    }

    /// The first slot strictly after `at`.
    pub fn next_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = at.with_timezone(&self.tz);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }
}

/// The IANA time zone `name` names, or why it names none.
pub fn time_zone(name: &str) -> Result<Tz, String> {
    name.parse::<Tz>()
        .map_err(|_| "not an IANA time zone, such as Europe/Berlin or UTC".to_string())
}

/// A slot as a job's source writes it: to the second, in UTC.
pub fn slot_text(slot: DateTime<Utc>) -> String {
    slot.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// What came due of a schedule by `now`, from its `next_at`: the latest due slot, how many
/// slots came due in all, and the next slot after `now`.
pub fn due_slots(
    cadence: &Cadence,
    next_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, u64, Option<DateTime<Utc>>) {
    // Counted one by one, up to a bound: a minutely schedule after a long downtime has
    // many, and only their number is wanted.
    const MOST: u64 = 100_000;
    let (mut latest, mut count) = (next_at, 1);
    loop {
        match cadence.next_after(latest) {
            Some(next) if next <= now && count < MOST => {
                latest = next;
                count += 1;
            }
            Some(next) if next > now => return (latest, count, Some(next)),
            Some(_) => return (latest, count, cadence.next_after(now)),
            None => return (latest, count, None),
        }
    }
}

/// How the scheduler runs.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// How often a replica looks for due schedules.
    pub interval: Duration,
    /// How long a replica holds a schedule it is queuing for.
    pub lease: Duration,
    /// How late a slot may be and still count as on time rather than missed.
    pub grace: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            interval: Duration::from_secs(1),
            lease: Duration::from_secs(60),
            grace: Duration::from_secs(120),
        }
    }
}

/// Queues the jobs of due schedules.
pub struct Scheduler {
    queue: Queue,
    config: SchedulerConfig,
    owner: String,
}

impl Scheduler {
    pub fn new(queue: Queue, config: SchedulerConfig) -> Scheduler {
        let owner = format!("scheduler-{}-{}", std::process::id(), uuid::Uuid::now_v7());
        Scheduler {
            queue,
            config,
            owner,
        }
    }

    /// Passes every interval until `stop`.
    pub fn start(self, stop: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let interval = self.config.interval;
            let report = |made: usize| {
                if made > 0 {
                    tracing::info!(made, "queued the jobs of due schedules");
                }
            };
            every(interval, stop, "scheduler", || self.run_once(), report).await;
        })
    }

    /// One pass: the jobs it queued.
    pub async fn run_once(&self) -> Result<usize, crate::QueueError> {
        self.queue
            .run_schedules(&self.owner, self.config.lease, self.config.grace)
            .await
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn a_cron_line_is_read_in_its_time_zone() {
        let monday = Cadence::parse("0 6 * * 1", "Europe/Berlin").unwrap();
        let saturday = Utc.with_ymd_and_hms(2026, 11, 28, 8, 0, 0).unwrap();
        // 06:00 in Berlin (CET, UTC+1) is 05:00 UTC.
        assert_eq!(
            monday.next_after(saturday),
            Some(Utc.with_ymd_and_hms(2026, 11, 30, 5, 0, 0).unwrap())
        );
        let summer = Utc.with_ymd_and_hms(2026, 7, 4, 8, 0, 0).unwrap();
        assert_eq!(
            monday.next_after(summer),
            Some(Utc.with_ymd_and_hms(2026, 7, 6, 4, 0, 0).unwrap())
        );
        let errors = Cadence::parse("61 6 * * 1", "Mars/Olympus").unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, ["cron", "timezone"]);
        assert_eq!(
            Cadence::parse("* * * * * *", "UTC").unwrap_err()[0].0,
            "cron"
        );
        assert_eq!(
            Cadence::parse("0 0 31 2 *", "UTC").unwrap_err()[0].0,
            "cron"
        );
        assert!(Cadence::parse("@daily", "UTC").is_ok());
    }

    #[test]
    fn missed_slots_are_counted_and_the_latest_is_named() {
        let hourly = Cadence::parse("0 * * * *", "UTC").unwrap();
        let first = Utc.with_ymd_and_hms(2026, 11, 28, 1, 0, 0).unwrap();
        let now = Utc.with_ymd_and_hms(2026, 11, 28, 4, 30, 0).unwrap();
        let (latest, count, next) = due_slots(&hourly, first, now);
        assert_eq!(latest, Utc.with_ymd_and_hms(2026, 11, 28, 4, 0, 0).unwrap());
        assert_eq!(count, 4);
        assert_eq!(
            next,
            Some(Utc.with_ymd_and_hms(2026, 11, 28, 5, 0, 0).unwrap())
        );
        assert_eq!(slot_text(latest), "2026-11-28T04:00:00Z");
    }
}
