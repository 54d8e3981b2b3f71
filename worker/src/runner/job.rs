//! One claimed job, from its claim to the answer the server gets: the stages run while a
//! heartbeat keeps the lease and a watcher turns a cancel request into a stop; the end is
//! reported (completed, failed, cancelled, handed back) while the lease is still held.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use contract::api::ClaimBody;
use contract::{Job, JobId, NormalizedTask, limits};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::heartbeat::{Beat, Heartbeat, HeartbeatConfig};
use super::lease::Lease;
use super::upload::upload;
use super::{KeepWorkspaces, WorkerConfig};
use crate::auth_refs;
use crate::client::{ClientError, QueueClient};
use crate::redact::Redactor;
use crate::stages::{
    Credentials, Flushed, Hold, Pause, Report, Restore, TaskOutcome, Warrant, run_task,
};
use crate::workspace::Workspace;

/// How a job's run ended, as told to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Completed,
    Failed {
        retryable: bool,
    },
    Cancelled,
    /// Stopped for an operator's pause; the job waits, paused, to be resumed.
    Paused,
    /// The steps are done; the job waits for an operator's approval before publishing.
    AwaitingApproval,
    /// The lease was lost: the server took it back, or it ran out while the server could
    /// not be reached. Nothing more was done or said about the job.
    Lost,
    /// The worker shut down mid-run and gave the job back to the queue.
    HandedBack,
}

/// What a handed-back job's failure says, so its page explains the retry.
pub const HANDED_BACK: &str =
    "the worker shut down during the run; the job goes back to the queue for another attempt";

/// The claim of the worker's next job that a success makes in the same call as its
/// completion (`complete-and-claim`): one round trip, and on PostgreSQL one commit, instead
/// of two. Not made once `stop` is cancelled.
#[derive(Debug, Clone)]
pub struct NextClaim {
    pub body: ClaimBody,
    pub stop: CancellationToken,
}

/// A job leased to this worker, and when the request that claimed it was sent (its lease
/// counts from then).
#[derive(Debug)]
pub struct Leased {
    pub job: Job,
    pub claimed_at: Instant,
}

/// Runs one job, claimed by a request sent at `claimed_at`, to its end and reports that
/// end to the server; with `next`, a success takes the worker's next job in the same call,
/// which this answers. `hand_back` stops the run and gives the job back (see
/// [`super::Shutdown::hand_back`]). The workspace is then removed or kept, as
/// [`WorkerConfig::keep_workspaces`] says; a lost job's always goes, since nothing of it
/// can be handed over any more.
pub async fn run_job(
    client: &QueueClient,
    config: &WorkerConfig,
    job: Job,
    claimed_at: Instant,
    hand_back: &CancellationToken,
    next: Option<&NextClaim>,
) -> (Settled, Option<Leased>) {
    let id = job.id;
    let taken = Mutex::new(None);
    let settled = run_and_settle(client, config, job, claimed_at, hand_back, next, &taken).await;
    let keep = match config.keep_workspaces {
        KeepWorkspaces::Always => true,
        KeepWorkspaces::Failed => matches!(settled, Settled::Failed { .. }),
        KeepWorkspaces::Never => false,
    };
    let workspace = Workspace::root_of(&config.stages.workdir, &id);
    if !keep
        && workspace.exists()
        && let Err(error) = tokio::fs::remove_dir_all(&workspace).await
    {
        tracing::warn!(job = %id, %error, path = %workspace.display(), "could not remove the workspace");
    }
    let taken = taken.into_inner().unwrap_or_else(PoisonError::into_inner);
    (settled, taken)
}

/// The claim loop's hold on a job: a heartbeat that succeeds within the lease.
struct LeaseHold<'a> {
    client: &'a QueueClient,
    lease: &'a Lease,
    /// The run's reports on their way to the queue, for a flush: weak, so the uploader
    /// still ends when the run drops its end.
    reports: mpsc::WeakUnboundedSender<Report>,
}

impl Hold for LeaseHold<'_> {
    fn confirm(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { self.lease.confirm(self.client).await.map(drop) })
    }

    fn latest_task(&self, settled: bool) -> BoxFuture<'_, Option<NormalizedTask>> {
        Box::pin(async move {
            let job = if settled {
                if let Some(reports) = self.reports.upgrade() {
                    let (flush, flushed) = Flushed::new();
                    if reports.send(Report::Flush(flush)).is_ok() {
                        drop(reports);
                        // Answered once sent, or dropped with the lease.
                        let _ = flushed.await;
                    }
                }
                self.lease.confirm(self.client).await.ok()?
            } else {
                self.lease.renew(self.client).await.ok()?
            };
            NormalizedTask::from_job(&job).ok()
        })
    }
}

async fn run_and_settle(
    client: &QueueClient,
    config: &WorkerConfig,
    job: Job,
    claimed_at: Instant,
    hand_back: &CancellationToken,
    next: Option<&NextClaim>,
    taken: &Mutex<Option<Leased>>,
) -> Settled {
    let attempt = job.attempt;
    let lease = Lease::new(&job.id, attempt, config.lease, claimed_at);
    let task = match NormalizedTask::from_job(&job) {
        Ok(task) => task,
        Err(message) => return settle(&lease, || fail(client, &job, &message, false)).await,
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
        (Err(e), _) | (_, Err(e)) => {
            let message = e.to_string();
            return settle(&lease, || fail(client, &job, &message, false)).await;
        }
    };
    let secrets = config
        .secrets
        .iter()
        .chain(credentials.repo.iter())
        .chain(credentials.publish.iter())
        .cloned();
    let redactor = Redactor::new(secrets.collect::<Vec<_>>());

    // The checkpoint this attempt resumes from, fetched before anything starts: without
    // it the run would redo work or, worse, publish without it.
    let mut restore = match &job.resume_from {
        None => None,
        // A round's start that kept no patch (nothing was saved before it): only where the
        // steps start, and the branch to start from.
        Some(checkpoint) if checkpoint.artifact.is_empty() => Some(Restore {
            checkpoint: checkpoint.clone(),
            patch: Vec::new(),
            session: None,
        }),
        Some(checkpoint) => match client.resume_patch(&job.id, attempt).await {
            Ok(patch) => Some(Restore {
                checkpoint: checkpoint.clone(),
                patch,
                session: None,
            }),
            Err(error) => {
                let message = format!(
                    "prepare: cannot fetch the checkpoint {} to resume from: {error}",
                    checkpoint.label()
                );
                let retryable = error.is_retryable();
                return settle(&lease, || fail(client, &job, &message, retryable)).await;
            }
        },
    };

    // The agent's session, for the steps to continue it. Without it they start a new
    // one and are told the job's history, so an outage here stops nothing.
    if let Some(restore) = &mut restore {
        restore.session = match client.resume_session(&job.id, attempt).await {
            Ok(Some(bytes)) => contract::session::KeptSession::read(&bytes)
                .inspect_err(|error| tracing::warn!(job = %job.id, %error, "the kept agent session is unreadable"))
                .ok(),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(job = %job.id, %error, "cannot fetch the kept agent session");
                None
            }
        };
    }

    // `cancel`: the server asked, or the lease is lost; `stop_run`: either that, an
    // immediate pause or a hand-back, which is what the stages obey.
    let cancel = CancellationToken::new();
    let pause = Pause::default();
    // The claim's long-poll may have held the request for a while before the job came,
    // and the lease counts from when it was sent: renewing it now, from now, is what
    // makes the worker's clock useful from the start.
    let heartbeat = Heartbeat::new(
        client.clone(),
        lease.clone(),
        HeartbeatConfig::for_lease(&lease),
        cancel.clone(),
    )
    .pausing(pause.clone());
    match heartbeat.run_once().await {
        Beat::Renewed | Beat::CancelRequested => {}
        Beat::Lost(error) => {
            tracing::warn!(job = %job.id, %error, "the lease was taken back before the run began");
            return Settled::Lost;
        }
        Beat::Failed(error) => {
            tracing::warn!(job = %job.id, %error, "the first heartbeat failed; retrying")
        }
    }
    let stop_run = hand_back.child_token();
    let done = CancellationToken::new();
    let watchers = [
        heartbeat.start(done.clone()),
        tokio::spawn({
            let (lease, cancel, done) = (lease.clone(), cancel.clone(), done.clone());
            async move { lease.watch(cancel, done).await }
        }),
        tokio::spawn(watch_cancel(
            client.clone(),
            job.id,
            (cancel.clone(), pause.clone()),
            attempt,
            done.clone(),
        )),
        tokio::spawn({
            let (cancel, stop_run, done) = (cancel.clone(), stop_run.clone(), done.clone());
            let pause = pause.clone();
            async move {
                tokio::select! {
                    _ = cancel.cancelled() => stop_run.cancel(),
                    _ = pause.immediate() => stop_run.cancel(),
                    _ = done.cancelled() => {}
                }
            }
        }),
    ];
    let (reports, inbox) = mpsc::unbounded_channel();
    let uploader = tokio::spawn(upload(client.clone(), lease.clone(), inbox));
    let hold = LeaseHold {
        client,
        lease: &lease,
        reports: reports.downgrade(),
    };
    let outcome = run_task(
        &config.stages,
        &job.id,
        &task,
        Warrant {
            redactor: &redactor,
            credentials: &credentials,
            hold: &hold,
            restore: restore.as_ref(),
            pause: &pause,
            approved: job
                .approval
                .as_ref()
                .is_some_and(contract::Approval::is_approved),
            spent: job.usage.unwrap_or_default(),
        },
        &stop_run,
        reports,
    )
    .await;
    // Every event and artifact reaches the server before the job's end does. The
    // heartbeat keeps the lease meanwhile: a slow upload must not lose it.
    let _ = uploader.await;
    let settled = if lease.lost().is_cancelled() {
        Settled::Lost
    } else {
        match outcome {
            TaskOutcome::Succeeded { summary } => {
                let summary = redactor.redact_and_cut(&summary, limits::REPORTED_TEXT_BYTES);
                // Only the first try claims: a try whose answer was lost may have leased a
                // job already, and each further claim would strand one more until its
                // lease ran out.
                let tried = AtomicBool::new(false);
                settle(&lease, || async {
                    let first = !tried.swap(true, Ordering::Relaxed);
                    let next = next.filter(|next| first && !next.stop.is_cancelled());
                    let Some(next) = next else {
                        let done = client.complete(&job.id, attempt, Some(&summary)).await;
                        return done.map(|_| Settled::Completed);
                    };
                    let claimed_at = Instant::now();
                    let done = client
                        .complete_and_claim(&job.id, attempt, Some(&summary), &next.body)
                        .await?;
                    let leased = done.job.map(|job| Leased { job, claimed_at });
                    *taken.lock().unwrap_or_else(PoisonError::into_inner) = leased;
                    Ok(Settled::Completed)
                })
                .await
            }
            TaskOutcome::Failed { stage, message } => {
                // Prepare fails on what may pass (a clone over a flaky network); a step or a
                // publish that failed would fail again the same way.
                let retryable = stage == contract::job::task::STAGE_PREPARE;
                // The stages redact what they report; this is the last door before the
                // job's errorMessage, so it redacts again (redaction is idempotent).
                let message = redactor
                    .redact_and_cut(&format!("{stage}: {message}"), limits::REPORTED_TEXT_BYTES);
                settle(&lease, || fail(client, &job, &message, retryable)).await
            }
            TaskOutcome::Paused { .. } => acknowledge_pause(client, &lease, &job).await,
            TaskOutcome::AwaitingApproval => {
                settle(&lease, || async {
                    let done = client.request_approval(&job.id, attempt).await?;
                    Ok(match done.status {
                        contract::JobState::Cancelled => Settled::Cancelled,
                        _ => Settled::AwaitingApproval,
                    })
                })
                .await
            }
            // Stopped for an immediate pause, not a cancel or a hand-back.
            TaskOutcome::Cancelled { .. } if !cancel.is_cancelled() && pause.is_immediate() => {
                acknowledge_pause(client, &lease, &job).await
            }
            TaskOutcome::Cancelled { .. } if !cancel.is_cancelled() => {
                settle(&lease, || async {
                    let done = client.fail(&job.id, attempt, HANDED_BACK, true).await;
                    done.map(|_| Settled::HandedBack)
                })
                .await
            }
            TaskOutcome::Cancelled { .. } => {
                let acked = settle(&lease, || async {
                    let done = client.ack_cancel(&job.id, attempt).await;
                    done.map(|_| Settled::Cancelled)
                });
                match acked.await {
                    Settled::Lost if !lease.lost().is_cancelled() => {
                        tracing::warn!(job = %job.id, "cancel/ack refused; failing the job instead");
                        let message = "stopped on a cancel request the server no longer had";
                        settle(&lease, || fail(client, &job, message, false)).await
                    }
                    settled => settled,
                }
            }
        }
    };
    done.cancel();
    for watcher in watchers {
        let _ = watcher.await;
    }
    settled
}

/// Says the job's end, again after a short backoff while the server cannot be reached and
/// the lease lasts (each end is idempotent for the same worker and attempt); `answer`
/// makes the request afresh each time. A refusal, or a lease that runs out first, is
/// [`Settled::Lost`].
async fn settle<F, Fut>(lease: &Lease, mut answer: F) -> Settled
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Settled, ClientError>>,
{
    let mut wait = Duration::from_millis(100);
    loop {
        match answer().await {
            Ok(settled) => return settled,
            Err(error) if error.is_retryable() && lease.is_held() => {
                tracing::warn!(job = %lease.job_id(), %error, "cannot tell the server how the job ended; trying again while the lease lasts");
                tokio::select! {
                    _ = tokio::time::sleep(wait.min(lease.remaining())) => {}
                    _ = lease.lost().cancelled() => {}
                }
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(error) => {
                tracing::warn!(job = %lease.job_id(), %error, "the server refused this job's end");
                return Settled::Lost;
            }
        }
    }
}

/// Tells the server the run stopped for its pause. The job ends cancelled instead when a
/// cancel came too, which the answer says. A pause the server no longer asks for (it was
/// withdrawn, or the budget raised, while the run stopped) hands the job back to the queue,
/// to run again from its latest checkpoint's attempt.
async fn acknowledge_pause(client: &QueueClient, lease: &Lease, job: &Job) -> Settled {
    let acked = settle(lease, || async {
        let done = client.ack_pause(&job.id, job.attempt).await?;
        Ok(match done.status {
            contract::JobState::Cancelled => Settled::Cancelled,
            _ => Settled::Paused,
        })
    });
    match acked.await {
        Settled::Lost if lease.is_held() => {
            tracing::warn!(job = %job.id, "pause/ack refused; handing the job back instead");
            let message = "stopped for a pause the server no longer asked for";
            settle(lease, || fail(client, job, message, true)).await
        }
        settled => settled,
    }
}

async fn fail(
    client: &QueueClient,
    job: &Job,
    message: &str,
    retryable: bool,
) -> Result<Settled, ClientError> {
    client
        .fail(&job.id, job.attempt, message, retryable)
        .await
        .map(|_| Settled::Failed { retryable })
}

/// Follows the job's event stream and stops the run at its `job.cancel_requested`, and
/// tells it of a `job.pause_requested`, so neither waits for the next heartbeat. The
/// stream replays the job's whole timeline: only what follows this `attempt`'s claim is
/// acted on, or the request that stopped an earlier attempt would stop this one too.
async fn watch_cancel(
    client: QueueClient,
    id: JobId,
    (cancel, pause): (CancellationToken, Pause),
    attempt: u32,
    done: CancellationToken,
) {
    let mut events = client.stream_events(&id, None);
    let mut ours = false;
    loop {
        let next = tokio::select! {
            _ = done.cancelled() => return,
            next = events.next() => next,
        };
        match next {
            Some(Ok(event)) if !ours => {
                let claim: Option<contract::events::LeaseHeld> =
                    contract::events::read_payload(&event.payload);
                ours = event.kind == contract::job::events::JOB_CLAIMED
                    && claim.is_some_and(|c| c.attempt == attempt);
            }
            Some(Ok(event)) if event.kind == contract::job::events::JOB_CANCEL_REQUESTED => {
                cancel.cancel();
                return;
            }
            Some(Ok(event)) if event.kind == contract::job::events::JOB_PAUSE_REQUESTED => {
                let request: Option<contract::events::PauseRequest> =
                    contract::events::read_payload(&event.payload);
                pause.request(request.is_some_and(|r| r.immediate));
            }
            Some(_) => {}
            None => return,
        }
    }
}
