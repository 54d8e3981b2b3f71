//! The run's reports on their way to the server: log lines batched, everything in order,
//! held back while the server cannot be reached and the lease still lasts, within a bound.

use std::collections::VecDeque;
use std::time::Duration;

use contract::events::{TaskEvent, Warning};
use contract::limits;
use tokio::sync::mpsc;

use super::lease::Lease;
use crate::client::{ClientError, QueueClient};
use crate::stages::Report;

/// The most output lines one `task.step.log` event carries; the most bytes is what the
/// server takes in one event's message.
const LOG_BATCH_LINES: usize = 200;
const LOG_BATCH_BYTES: usize = limits::EVENT_MESSAGE_BYTES;

/// The most bytes of output lines held back while the server cannot be reached. Past it,
/// lines are counted and left out, and one warning takes their place in the timeline; step
/// events and artifacts are always kept (they are few, an artifact waits as its file's
/// path, and the timeline needs them).
const HELD_LOG_BYTES: usize = 16 << 20;

/// What waits to be sent: a report, or the output lines left out at that point.
#[derive(Debug)]
enum Held {
    Report(Report),
    LeftOut { lines: usize, bytes: usize },
}

/// The run's reports in order: those already taken off the channel while the server could
/// not be reached, then the channel itself. Taking them off is what bounds the memory a
/// long outage costs, since the channel has no bound of its own (a step must never wait on
/// the network to print).
struct Backlog {
    inbox: mpsc::UnboundedReceiver<Report>,
    held: VecDeque<Held>,
    held_log_bytes: usize,
}

fn is_log(report: &Report) -> bool {
    matches!(report, Report::Event { kind, .. } if kind == contract::job::task::STEP_LOG)
}

fn log_bytes(report: &Report) -> usize {
    match report {
        Report::Event { message, .. } if is_log(report) => message.len(),
        _ => 0,
    }
}

impl Backlog {
    fn new(inbox: mpsc::UnboundedReceiver<Report>) -> Backlog {
        Backlog {
            inbox,
            held: VecDeque::new(),
            held_log_bytes: 0,
        }
    }

    async fn next(&mut self) -> Option<Held> {
        match self.held.pop_front() {
            Some(held) => {
                if let Held::Report(report) = &held {
                    self.held_log_bytes -= log_bytes(report);
                }
                Some(held)
            }
            None => self.inbox.recv().await.map(Held::Report),
        }
    }

    /// The next report if one is already waiting (never a left-out mark: a batch of lines
    /// must not join across it).
    fn try_next(&mut self) -> Option<Report> {
        match self.held.front() {
            Some(Held::Report(_)) => match self.held.pop_front() {
                Some(Held::Report(report)) => {
                    self.held_log_bytes -= log_bytes(&report);
                    Some(report)
                }
                _ => None,
            },
            Some(Held::LeftOut { .. }) => None,
            None => self.inbox.try_recv().ok(),
        }
    }

    fn put_back(&mut self, report: Report) {
        self.held_log_bytes += log_bytes(&report);
        self.held.push_front(Held::Report(report));
    }

    /// Takes everything waiting on the channel into the backlog, leaving out the output
    /// lines that would pass [`HELD_LOG_BYTES`].
    fn absorb(&mut self) {
        while let Ok(report) = self.inbox.try_recv() {
            let bytes = log_bytes(&report);
            if is_log(&report) && self.held_log_bytes + bytes > HELD_LOG_BYTES {
                let lines = match &report {
                    Report::Event { message, .. } => message.lines().count().max(1),
                    _ => 1,
                };
                match self.held.back_mut() {
                    Some(Held::LeftOut {
                        lines: left_lines,
                        bytes: left_bytes,
                    }) => {
                        *left_lines += lines;
                        *left_bytes += bytes;
                    }
                    _ => self.held.push_back(Held::LeftOut { lines, bytes }),
                }
                continue;
            }
            self.held_log_bytes += bytes;
            self.held.push_back(Held::Report(report));
        }
    }
}

/// The warning that stands where output lines were left out.
fn left_out(lines: usize, bytes: usize) -> Report {
    Report::Event {
        kind: contract::job::task::WARNING.into(),
        level: contract::EventLevel::Warn,
        message: format!(
            "{lines} output line(s) ({bytes} bytes) were left out here: the server could not \
             be reached, and the worker holds at most {} MiB of output for it; the step's \
             own log artifact has them all",
            HELD_LOG_BYTES >> 20
        ),
        payload: serde_json::Value::Object(
            Warning {
                left_out_lines: Some(lines),
                left_out_bytes: Some(bytes),
                ..Warning::default()
            }
            .payload(),
        ),
    }
}

/// Joins the `task.step.log` events already waiting behind `first` (same step) into it, one
/// line each, so a chatty agent costs a request per batch rather than per line. It only
/// takes what is queued: a quiet agent's line still goes out at once.
fn coalesce(first: Report, inbox: &mut Backlog) -> (Report, Option<Report>) {
    let Report::Event {
        kind,
        level,
        mut message,
        payload,
    } = first
    else {
        return (first, None);
    };
    if kind != contract::job::task::STEP_LOG {
        return (
            Report::Event {
                kind,
                level,
                message,
                payload,
            },
            None,
        );
    }
    let mut lines = 1;
    let mut left = None;
    while lines < LOG_BATCH_LINES && message.len() < LOG_BATCH_BYTES {
        match inbox.try_next() {
            Some(Report::Event {
                kind: next_kind,
                message: next,
                payload: next_payload,
                ..
            }) if next_kind == kind
                && next_payload == payload
                && message.len() + 1 + next.len() <= LOG_BATCH_BYTES =>
            {
                message.push('\n');
                message.push_str(&next);
                lines += 1;
            }
            Some(other) => {
                left = Some(other);
                break;
            }
            None => break,
        }
    }
    (
        Report::Event {
            kind,
            level,
            message,
            payload,
        },
        left,
    )
}

/// Sends the run's reports to the server in order: events appended, artifacts uploaded.
///
/// While the server cannot be reached (or answers 5xx or 429), the report at the head is
/// sent again after a short backoff and the rest wait behind it, in order, for as long as
/// the lease is held: a worker cut off for a few seconds loses nothing. They wait in
/// memory (an artifact only as its file's path), output lines up to [`HELD_LOG_BYTES`];
/// lines past that are left out and a warning in their place says how many. Once the lease
/// is lost, what is left is dropped with one warning that says how much. A report the server refuses for itself (a 4xx that is not about the
/// lease) is dropped alone, with a warning.
pub(super) async fn upload(
    client: QueueClient,
    lease: Lease,
    inbox: mpsc::UnboundedReceiver<Report>,
) {
    let mut backlog = Backlog::new(inbox);
    let mut dropped = 0usize;
    while let Some(next) = backlog.next().await {
        let report = match next {
            Held::Report(report) => {
                let (report, left) = coalesce(report, &mut backlog);
                if let Some(left) = left {
                    backlog.put_back(left);
                }
                report
            }
            Held::LeftOut { lines, bytes } => left_out(lines, bytes),
        };
        if let Report::Flush(flushed) = &report {
            // Everything before it was sent (or dropped with the lease) in order.
            flushed.answer();
            continue;
        }
        if lease.lost().is_cancelled() {
            dropped += 1;
            continue;
        }
        let mut wait = Duration::from_millis(100);
        loop {
            let error = match send(&client, &lease, &report).await {
                Ok(()) => break,
                Err(error) => error,
            };
            if error.is_retryable() && lease.is_held() {
                tracing::debug!(job = %lease.job_id(), %error, "reporting failed; trying again while the lease lasts");
                backlog.absorb();
                tokio::select! {
                    _ = tokio::time::sleep(wait.min(lease.remaining())) => {}
                    _ = lease.lost().cancelled() => {}
                }
                backlog.absorb();
                wait = (wait * 2).min(Duration::from_secs(2));
                continue;
            }
            if error.is_retryable() || error.code() == Some("job_ownership_mismatch") {
                lease.lost().cancel();
                dropped += 1;
            } else {
                tracing::warn!(job = %lease.job_id(), %error, "the server refused a report; it is left out");
            }
            break;
        }
    }
    if dropped > 0 {
        tracing::warn!(
            job = %lease.job_id(),
            reports = dropped,
            "the job's lease was lost, so {dropped} report(s) of this run (events and artifacts) were not sent; the job runs again elsewhere"
        );
    }
}

/// One report, sent once.
async fn send(client: &QueueClient, lease: &Lease, report: &Report) -> Result<(), ClientError> {
    let (id, attempt) = (lease.job_id(), lease.attempt());
    match report {
        Report::Event {
            kind,
            level,
            message,
            payload,
        } => {
            let event = contract::NewEvent {
                kind: kind.clone(),
                level: *level,
                message: message.clone(),
                payload: match payload {
                    serde_json::Value::Object(map) => map.clone(),
                    _ => serde_json::Map::new(),
                },
            };
            client.append_event(id, attempt, &event).await.map(drop)
        }
        Report::Artifact { name, path } => match tokio::fs::read(path).await {
            Ok(bytes) => client
                .upload_artifact(id, attempt, name, content_type(name), bytes)
                .await
                .map(drop),
            Err(error) => {
                tracing::warn!(job = %id, artifact = %name, %error, "artifact file unreadable");
                Ok(())
            }
        },
        Report::Flush(_) => Ok(()),
    }
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("json") => "application/json",
        Some("patch") => "text/x-diff",
        _ => "text/plain; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    use contract::EventLevel;
    use contract::events::StepLog;
    use serde_json::Value;

    use super::*;

    fn log(step: usize, line: &str) -> Report {
        Report::Event {
            kind: contract::job::task::STEP_LOG.into(),
            level: EventLevel::Info,
            message: line.into(),
            payload: Value::Object(StepLog { step_index: step }.payload()),
        }
    }

    fn message(report: &Report) -> &str {
        match report {
            Report::Event { message, .. } => message,
            Report::Artifact { name, .. } => name,
            Report::Flush(_) => "flush",
        }
    }

    #[test]
    fn waiting_log_lines_of_one_step_go_out_as_one_event_in_order() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut rx = Backlog::new(rx);
        for line in ["b", "c"] {
            tx.send(log(0, line)).unwrap();
        }
        tx.send(log(1, "other step")).unwrap();
        tx.send(log(1, "more")).unwrap();
        let (first, left) = coalesce(log(0, "a"), &mut rx);
        assert_eq!(message(&first), "a\nb\nc");
        let left = left.expect("the other step's line is kept, not lost");
        assert_eq!(message(&left), "other step");
        let (second, none) = coalesce(left, &mut rx);
        assert_eq!(message(&second), "other step\nmore");
        assert!(none.is_none());
    }

    #[test]
    fn a_batch_stops_at_its_line_limit_and_other_reports_pass_untouched() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut rx = Backlog::new(rx);
        for i in 0..LOG_BATCH_LINES + 5 {
            tx.send(log(0, &format!("line {i}"))).unwrap();
        }
        let (batch, left) = coalesce(log(0, "start"), &mut rx);
        assert_eq!(message(&batch).lines().count(), LOG_BATCH_LINES);
        assert!(left.is_none());
        let artifact = Report::Artifact {
            name: "logs/prepare.log".into(),
            path: "/nowhere".into(),
        };
        let (same, _) = coalesce(artifact, &mut rx);
        assert_eq!(message(&same), "logs/prepare.log");
        // "start" and 199 queued lines made the batch; six are left for the next one.
        assert_eq!(rx.inbox.len(), 6, "an artifact takes no log lines with it");
    }

    #[test]
    fn a_flush_waits_behind_the_lines_before_it_and_is_never_joined_into_them() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut backlog = Backlog::new(rx);
        let (flush, mut flushed) = crate::stages::Flushed::new();
        tx.send(log(0, "a")).unwrap();
        tx.send(log(0, "b")).unwrap();
        tx.send(Report::Flush(flush.clone())).unwrap();
        tx.send(log(0, "c")).unwrap();
        let first = backlog.inbox.try_recv().unwrap();
        let (batch, left) = coalesce(first, &mut backlog);
        assert_eq!(message(&batch), "a\nb");
        assert_eq!(left, Some(Report::Flush(flush.clone())));
        // Not answered until the uploader reaches it; answered once, however often asked.
        assert!(flushed.try_recv().is_err());
        flush.answer();
        flush.answer();
        assert_eq!(flushed.try_recv(), Ok(()));
    }

    #[tokio::test]
    async fn in_an_outage_output_past_the_bound_is_counted_not_held_and_step_events_are_kept() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut backlog = Backlog::new(rx);
        let line = "x".repeat(1 << 20);
        let lines = HELD_LOG_BYTES >> 20;
        for _ in 0..lines + 4 {
            tx.send(log(0, &line)).unwrap();
        }
        tx.send(Report::Event {
            kind: contract::job::task::STEP_FINISHED.into(),
            level: EventLevel::Info,
            message: "step 1 done".into(),
            payload: Value::Object(StepLog { step_index: 0 }.payload()),
        })
        .unwrap();
        for _ in 0..3 {
            tx.send(log(0, &line)).unwrap();
        }
        backlog.absorb();
        assert_eq!(backlog.held_log_bytes, HELD_LOG_BYTES);
        assert!(backlog.inbox.is_empty());
        let mut seen = Vec::new();
        drop(tx);
        while let Some(held) = backlog.next().await {
            seen.push(match held {
                Held::Report(report) if is_log(&report) => "line".to_string(),
                Held::Report(report) => message(&report).to_string(),
                Held::LeftOut { lines, bytes } => format!("left out {lines} {bytes}"),
            });
        }
        let mut expected = vec!["line".to_string(); lines];
        expected.push(format!("left out 4 {}", 4 << 20));
        expected.push("step 1 done".into());
        expected.push(format!("left out 3 {}", 3 << 20));
        assert_eq!(seen, expected);
        assert_eq!(backlog.held_log_bytes, 0);
        let warning = left_out(4, 4 << 20);
        assert!(
            message(&warning).starts_with("4 output line(s)"),
            "{}",
            message(&warning)
        );
    }
}
