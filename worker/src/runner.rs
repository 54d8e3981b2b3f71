//! The claim loop: long-polls the server for jobs this worker can run, up to `concurrency`
//! at a time, and runs each through the stages while a heartbeat keeps its lease and a
//! watcher on the job's event stream turns a cancel request into a stop within moments.
//! Everything goes through the REST API ([`QueueClient`]), never the database, so the same
//! loop runs on a remote machine and embedded in `stepwise serve`.

use std::time::Duration;

use contract::{Job, NormalizedTask};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::auth_refs;
use crate::client::{ClaimParams, ClientError, QueueClient};
use crate::redact::Redactor;
use crate::stages::{Credentials, Report, StageConfig, TaskOutcome, run_task};

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub stages: StageConfig,
    /// Jobs run at once.
    pub concurrency: usize,
    /// The lease asked for at claim; heartbeats renew it every third of it.
    pub lease: Duration,
    /// How long one claim request may wait on the server for a job.
    pub claim_wait: Duration,
    /// Secrets to redact besides the shapes and the job's own (the worker's token, say).
    pub secrets: Vec<String>,
    /// After a stop, how long running jobs may go on before they are handed back.
    pub drain: Duration,
    /// Which workspaces outlive their job. Everything a run produced is on the server by
    /// then (logs, patches, results), so a workspace is only a checkout to look into.
    pub keep_workspaces: KeepWorkspaces,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeepWorkspaces {
    /// Remove every workspace when its job ends.
    Never,
    /// Keep the workspaces of failed jobs, to look into; remove the rest.
    #[default]
    Failed,
    /// Keep them all (disk use grows with every job).
    Always,
}

/// How a worker is told to stop, in two stages.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    /// Claim nothing more; the running jobs get [`WorkerConfig::drain`] to finish.
    pub stop: CancellationToken,
    /// Stop the running agents now and hand their jobs back to the queue (a retryable
    /// failure, so another worker picks them up). The runner fires it when the drain runs
    /// out; a second signal may fire it sooner.
    pub hand_back: CancellationToken,
}

impl WorkerConfig {
    pub fn new(stages: StageConfig) -> WorkerConfig {
        WorkerConfig {
            stages,
            concurrency: 1,
            lease: Duration::from_secs(60),
            claim_wait: Duration::from_secs(20),
            secrets: Vec::new(),
            drain: Duration::from_secs(20),
            keep_workspaces: KeepWorkspaces::default(),
        }
    }
}

/// Claims and runs jobs until `shutdown.stop`; then claims no more, gives the jobs it holds
/// the drain time to finish, and hands back those still running.
pub async fn run(client: QueueClient, config: WorkerConfig, shutdown: Shutdown) {
    let stop = &shutdown.stop;
    let mut running = JoinSet::new();
    let mut backoff = Duration::from_millis(250);
    'claiming: loop {
        while running.len() >= config.concurrency.max(1) {
            tokio::select! {
                _ = stop.cancelled() => break 'claiming,
                _ = running.join_next() => {}
            }
        }
        let params = ClaimParams {
            capabilities: config.stages.capabilities.clone(),
            allowed_types: None,
            lease_seconds: Some(config.lease.as_secs().max(1)),
            wait_seconds: Some(config.claim_wait.as_secs_f64()),
            worker_version: Some(concat!("stepwise-worker ", env!("CARGO_PKG_VERSION")).into()),
        };
        let claimed = tokio::select! {
            _ = stop.cancelled() => break 'claiming,
            claimed = client.claim(&params) => claimed,
        };
        match claimed {
            Ok(Some(job)) => {
                backoff = Duration::from_millis(250);
                let (client, config) = (client.clone(), config.clone());
                let hand_back = shutdown.hand_back.clone();
                running.spawn(async move { run_job(&client, &config, job, &hand_back).await });
            }
            Ok(None) => backoff = Duration::from_millis(250),
            Err(error) => {
                tracing::warn!(%error, "claiming a job failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => break 'claiming,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
    if !running.is_empty() {
        tracing::info!(
            jobs = running.len(),
            drain = ?config.drain,
            "stopping: waiting for the running jobs, then handing back the rest"
        );
    }
    let drained = async { while running.join_next().await.is_some() {} };
    tokio::select! {
        _ = drained => return,
        _ = tokio::time::sleep(config.drain) => {}
        _ = shutdown.hand_back.cancelled() => {}
    }
    shutdown.hand_back.cancel();
    while running.join_next().await.is_some() {}
}

/// How a job's run ended, as told to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Completed,
    Failed {
        retryable: bool,
    },
    Cancelled,
    /// The server no longer considered this worker the job's owner.
    Lost,
    /// The worker shut down mid-run and gave the job back to the queue.
    HandedBack,
}

/// What a handed-back job's failure says, so its page explains the retry.
pub const HANDED_BACK: &str =
    "the worker shut down during the run; the job goes back to the queue for another attempt";

/// Runs one claimed job to its end and reports that end to the server. `hand_back` stops
/// the run and gives the job back (see [`Shutdown::hand_back`]). The workspace is then
/// removed or kept, as [`WorkerConfig::keep_workspaces`] says.
pub async fn run_job(
    client: &QueueClient,
    config: &WorkerConfig,
    job: Job,
    hand_back: &CancellationToken,
) -> Settled {
    let id = job.id.clone();
    let settled = run_and_settle(client, config, job, hand_back).await;
    let keep = match config.keep_workspaces {
        KeepWorkspaces::Always => true,
        KeepWorkspaces::Failed => matches!(settled, Settled::Failed { .. }),
        KeepWorkspaces::Never => false,
    };
    let workspace = config.stages.workdir.join(&id);
    if !keep
        && workspace.exists()
        && let Err(error) = tokio::fs::remove_dir_all(&workspace).await
    {
        tracing::warn!(job = %id, %error, path = %workspace.display(), "could not remove the workspace");
    }
    settled
}

async fn run_and_settle(
    client: &QueueClient,
    config: &WorkerConfig,
    job: Job,
    hand_back: &CancellationToken,
) -> Settled {
    let attempt = job.attempt;
    let task = match NormalizedTask::from_job(&job) {
        Ok(task) => task,
        Err(message) => return fail(client, &job, &message, false).await,
    };
    let auth = &task.payload.auth;
    let resolve = |field: &str, reference: &Option<String>| {
        reference
            .as_deref()
            .map(|r| auth_refs::resolve(field, r, |name| std::env::var(name).ok()))
            .transpose()
    };
    let credentials = match (
        resolve("auth.repoAuthRef", &auth.repo_auth_ref),
        resolve("auth.publishAuthRef", &auth.publish_auth_ref),
    ) {
        (Ok(repo), Ok(publish)) => Credentials { repo, publish },
        (Err(e), _) | (_, Err(e)) => return fail(client, &job, &e.to_string(), false).await,
    };
    let secrets = config
        .secrets
        .iter()
        .chain(credentials.repo.iter())
        .chain(credentials.publish.iter())
        .cloned();
    let redactor = Redactor::new(secrets.collect::<Vec<_>>());

    // `cancel`: the server asked (or took the lease back); `stop_run`: either that or a
    // hand-back, which is what the stages obey.
    let cancel = CancellationToken::new();
    let stop_run = hand_back.child_token();
    let lost = CancellationToken::new();
    let done = CancellationToken::new();
    let watchers = [
        tokio::spawn(heartbeat(
            client.clone(),
            job.id.clone(),
            attempt,
            config.lease,
            cancel.clone(),
            lost.clone(),
            done.clone(),
        )),
        tokio::spawn(watch_cancel(
            client.clone(),
            job.id.clone(),
            cancel.clone(),
            done.clone(),
        )),
        tokio::spawn({
            let (cancel, stop_run, done) = (cancel.clone(), stop_run.clone(), done.clone());
            async move {
                tokio::select! {
                    _ = cancel.cancelled() => stop_run.cancel(),
                    _ = done.cancelled() => {}
                }
            }
        }),
    ];
    let (reports, inbox) = mpsc::unbounded_channel();
    let uploader = tokio::spawn(upload(client.clone(), job.id.clone(), attempt, inbox));
    let outcome = run_task(
        &config.stages,
        &job.id,
        &task,
        &redactor,
        &credentials,
        &stop_run,
        reports,
    )
    .await;
    // Every event and artifact reaches the server before the job's end does.
    let _ = uploader.await;
    done.cancel();
    for watcher in watchers {
        let _ = watcher.await;
    }
    if lost.is_cancelled() {
        return Settled::Lost;
    }
    match outcome {
        TaskOutcome::Succeeded { summary } => {
            match client.complete(&job.id, attempt, Some(&summary)).await {
                Ok(_) => Settled::Completed,
                Err(error) => settled_error(&job, error),
            }
        }
        TaskOutcome::Failed { stage, message } => {
            // Prepare fails on what may pass (a clone over a flaky network); a step or a
            // publish that failed would fail again the same way.
            let retryable = stage == contract::job::task::STAGE_PREPARE;
            fail(client, &job, &format!("{stage}: {message}"), retryable).await
        }
        TaskOutcome::Cancelled { .. } if !cancel.is_cancelled() => {
            match client.fail(&job.id, attempt, HANDED_BACK, true).await {
                Ok(_) => Settled::HandedBack,
                Err(error) => settled_error(&job, error),
            }
        }
        TaskOutcome::Cancelled { .. } => match client.ack_cancel(&job.id, attempt).await {
            Ok(_) => Settled::Cancelled,
            Err(error) => {
                tracing::warn!(job = %job.id, %error, "cancel/ack refused; failing the job instead");
                fail(
                    client,
                    &job,
                    "stopped on a cancel request the server no longer had",
                    false,
                )
                .await
            }
        },
    }
}

async fn fail(client: &QueueClient, job: &Job, message: &str, retryable: bool) -> Settled {
    match client.fail(&job.id, job.attempt, message, retryable).await {
        Ok(_) => Settled::Failed { retryable },
        Err(error) => settled_error(job, error),
    }
}

fn settled_error(job: &Job, error: ClientError) -> Settled {
    tracing::warn!(job = %job.id, %error, "the server refused this job's end");
    Settled::Lost
}

/// Renews the lease every third of it (at most every 20 s). A reply that carries a cancel
/// request stops the run; a refusal means the lease was taken back: the run stops as lost.
async fn heartbeat(
    client: QueueClient,
    id: String,
    attempt: u32,
    lease: Duration,
    cancel: CancellationToken,
    lost: CancellationToken,
    done: CancellationToken,
) {
    let every = (lease / 3).clamp(Duration::from_millis(200), Duration::from_secs(20));
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match client
            .heartbeat(&id, attempt, Some(lease.as_secs().max(1)))
            .await
        {
            Ok(job) if job.cancel_requested_at.is_some() => cancel.cancel(),
            Ok(_) => {}
            Err(error) if error.status().is_some_and(|s| s.is_client_error()) => {
                tracing::warn!(job = %id, %error, "the lease was taken back; stopping");
                lost.cancel();
                cancel.cancel();
                return;
            }
            Err(error) => tracing::warn!(job = %id, %error, "heartbeat failed; retrying"),
        }
    }
}

/// Follows the job's event stream and stops the run at its `job.cancel_requested`, so a
/// cancel does not wait for the next heartbeat.
async fn watch_cancel(
    client: QueueClient,
    id: String,
    cancel: CancellationToken,
    done: CancellationToken,
) {
    let mut events = client.stream_events(&id, None);
    loop {
        let next = tokio::select! {
            _ = done.cancelled() => return,
            next = events.next() => next,
        };
        match next {
            Some(Ok(event)) if event.kind == contract::job::events::JOB_CANCEL_REQUESTED => {
                cancel.cancel();
                return;
            }
            Some(_) => {}
            None => return,
        }
    }
}

/// The most output lines one `task.step.log` event carries, and the most bytes.
const LOG_BATCH_LINES: usize = 200;
const LOG_BATCH_BYTES: usize = 16 * 1024;

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
            }) if next_kind == kind && next_payload == payload => {
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
async fn upload(
    client: QueueClient,
    id: String,
    attempt: u32,
    mut inbox: mpsc::UnboundedReceiver<Report>,
) {
    let mut carried: Option<Report> = None;
    while let Some(next) = match carried.take() {
        Some(report) => Some(report),
        None => inbox.recv().await,
    } {
        let (report, left) = coalesce(next, &mut inbox);
        carried = left;
        let sent = match report {
            Report::Event {
                kind,
                level,
                message,
                payload,
            } => {
                let event = contract::NewEvent {
                    kind,
                    level,
                    message,
                    payload: match payload {
                        serde_json::Value::Object(map) => map,
                        _ => serde_json::Map::new(),
                    },
                };
                client.append_event(&id, attempt, &event).await.map(drop)
            }
            Report::Artifact { name, path } => match tokio::fs::read(&path).await {
                Ok(bytes) => client
                    .upload_artifact(&id, attempt, &name, content_type(&name), bytes)
                    .await
                    .map(drop),
                Err(error) => {
                    tracing::warn!(job = %id, artifact = %name, %error, "artifact file unreadable");
                    Ok(())
                }
            },
        };
        if let Err(error) = sent {
            tracing::warn!(job = %id, %error, "reporting to the server failed");
        }
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
