//! The run's reports on their way to the server: log lines batched, everything in order,
//! held back while the server cannot be reached and the lease still lasts.

use std::time::Duration;

use contract::limits;
use tokio::sync::mpsc;

use super::lease::Lease;
use crate::client::{ClientError, QueueClient};
use crate::stages::Report;

/// The most output lines one `task.step.log` event carries; the most bytes is what the
/// server takes in one event's message.
const LOG_BATCH_LINES: usize = 200;
const LOG_BATCH_BYTES: usize = limits::EVENT_MESSAGE_BYTES;

/// Joins the `task.step.log` events already waiting behind `first` (same step) into it, one
/// line each, so a chatty agent costs a request per batch rather than per line. It only
/// takes what is queued: a quiet agent's line still goes out at once.
fn coalesce(
    first: Report,
    inbox: &mut mpsc::UnboundedReceiver<Report>,
) -> (Report, Option<Report>) {
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
        match inbox.try_recv() {
            Ok(Report::Event {
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
            Ok(other) => {
                left = Some(other);
                break;
            }
            Err(_) => break,
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
/// memory (an artifact only as its file's path), so what waits is bounded by what a run
/// writes in one lease. Once the lease is lost, what is left is dropped with one warning
/// that says how much. A report the server refuses for itself (a 4xx that is not about the
/// lease) is dropped alone, with a warning.
pub(super) async fn upload(
    client: QueueClient,
    lease: Lease,
    mut inbox: mpsc::UnboundedReceiver<Report>,
) {
    let mut carried: Option<Report> = None;
    let mut dropped = 0usize;
    while let Some(next) = match carried.take() {
        Some(report) => Some(report),
        None => inbox.recv().await,
    } {
        let (report, left) = coalesce(next, &mut inbox);
        carried = left;
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
                tokio::select! {
                    _ = tokio::time::sleep(wait.min(lease.remaining())) => {}
                    _ = lease.lost().cancelled() => {}
                }
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
    use serde_json::json;

    use super::*;

    fn log(step: usize, line: &str) -> Report {
        Report::Event {
            kind: contract::job::task::STEP_LOG.into(),
            level: EventLevel::Info,
            message: line.into(),
            payload: json!({ "stepIndex": step }),
        }
    }

    fn message(report: &Report) -> &str {
        match report {
            Report::Event { message, .. } => message,
            Report::Artifact { name, .. } => name,
        }
    }

    #[test]
    fn waiting_log_lines_of_one_step_go_out_as_one_event_in_order() {
        let (tx, mut rx) = mpsc::unbounded_channel();
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
        let (tx, mut rx) = mpsc::unbounded_channel();
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
        assert_eq!(rx.len(), 6, "an artifact takes no log lines with it");
    }
}
