//! `stepwise submit` and `stepwise jobs …`: the queue from a terminal. These commands talk
//! to a running server over its HTTP API through [`QueueClient`], like every other client,
//! so they work from any machine that has a token and never open the database.

mod course;
mod render;
mod submit;

use std::fmt;
use std::io::Write;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use contract::{JobEvent, JobId, JobState, PublishMode, RuntimeMode};
use futures_util::StreamExt;
use serde_json::json;
use worker::client::{ClientError, QueueClient};

pub use render::{event_line, job_summary, job_table};
pub use submit::SubmitArgs;
pub(super) use submit::read_request;

/// Events are read in pages of this size when not following.
const EVENTS_PAGE: u32 = 200;

#[derive(Debug, thiserror::Error)]
pub enum JobsCliError {
    #[error("{error}{hint}", error = .0, hint = token_hint(.0))]
    Client(#[from] ClientError),
    #[error("cannot read the job request from {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error(
        "{path} is not valid JSON ({error}); write a job request like the README's example: {{\"type\": \"task\", \"payload\": {{\"repository\": …, \"task\": {{…}}}}}}"
    )]
    Json {
        path: String,
        error: serde_json::Error,
    },
    #[error(
        "the event stream of job {0} ended without the job finishing; run the command again with --after and the last event id to resume"
    )]
    StreamEnded(String),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

type Result<T, E = JobsCliError> = std::result::Result<T, E>;

/// The server's 401 tells an HTTP client which header to send; a CLI user needs the flag.
fn token_hint(error: &ClientError) -> &'static str {
    match error.status() {
        Some(worker::client::StatusCode::UNAUTHORIZED) => {
            "; pass a valid token with --token or STEPWISE_TOKEN (`stepwise token create` makes one)"
        }
        _ => "",
    }
}

/// Where the server is and who is asking; shared by every command that uses the API.
#[derive(Clone, Args)]
pub struct ClientArgs {
    /// The stepwise server to talk to.
    #[arg(long, env = "STEPWISE_SERVER", default_value = "http://127.0.0.1:3000")]
    pub server: String,
    /// An API token: the admin token `stepwise serve` printed at its first start, or one
    /// made with `stepwise token create`.
    #[arg(long, env = "STEPWISE_TOKEN", hide_env_values = true)]
    pub token: String,
}

impl fmt::Debug for ClientArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientArgs")
            .field("server", &self.server)
            .field("token", &"[redacted]")
            .finish()
    }
}

impl ClientArgs {
    pub(super) fn client(&self) -> Result<QueueClient> {
        Ok(QueueClient::new(&self.server, &self.token)?)
    }
}

/// The page of a job in the dashboard.
fn page_url(client: &QueueClient, id: &JobId) -> String {
    format!(
        "{}/tasks/queue/{id}",
        client.base_url().as_str().trim_end_matches('/')
    )
}

fn runtime_parser() -> impl TypedValueParser<Value = RuntimeMode> {
    PossibleValuesParser::new(RuntimeMode::ALL.map(RuntimeMode::as_str))
        .try_map(|s| s.parse::<RuntimeMode>())
}

fn publish_parser() -> impl TypedValueParser<Value = PublishMode> {
    PossibleValuesParser::new(PublishMode::ALL.map(PublishMode::as_str))
        .try_map(|s| s.parse::<PublishMode>())
}

fn state_parser() -> impl TypedValueParser<Value = JobState> {
    PossibleValuesParser::new(JobState::ALL.map(JobState::as_str))
        .try_map(|s| s.parse::<JobState>())
}

fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List jobs, newest first, a page at a time.
    List(ListArgs),
    /// Show one job: status, attempt, worker, cancel request, result or error, and its task.
    Show(ShowArgs),
    /// Cancel a job: at once when queued; a running job's worker stops it and acknowledges.
    Cancel(CancelArgs),
    /// Pause a job: at once when queued; a running job's worker stops after the running
    /// step (or at once with --now) and the job waits, its work kept in a checkpoint.
    Pause(course::PauseArgs),
    /// Resume a paused job from its checkpoint (or another with --checkpoint).
    Resume(course::ResumeArgs),
    /// Run a failed, cancelled or dead-lettered job again from a step (by default the one
    /// that failed), its earlier work restored from the checkpoint before it.
    Retry(course::RetryArgs),
    /// Add steps after a job's own: a queued or paused job runs them with the rest, a
    /// running one after its current steps, and a job awaiting approval goes back to the
    /// queue to run them.
    #[command(name = "add-step", visible_alias = "append")]
    Append(course::AppendArgs),
    /// Approve a job awaiting approval: it publishes its work, no step run again.
    Approve(course::ApproveArgs),
    /// Reject a job awaiting approval: it fails with the reason, nothing is published.
    Reject(course::RejectArgs),
    /// Follow up on a job that succeeded or failed: its next round runs these steps from
    /// what it last pushed, and publishes to the same branch and pull request.
    #[command(name = "follow-up")]
    FollowUp(course::FollowUpArgs),
    /// Set a job's budget (what it may spend in all), replacing the one it had: a job
    /// paused for its budget can be resumed once the new one is not spent.
    Budget(course::BudgetArgs),
    /// Print a job's events; with --follow, keep printing live ones until the job finishes.
    Events(EventsArgs),
    /// List a job's checkpoints: all its work after each step and iteration, as a patch.
    Checkpoints(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only jobs in this state.
    #[arg(long, value_parser = state_parser())]
    status: Option<JobState>,
    /// Only jobs of this type (`task`).
    #[arg(long = "type", value_name = "TYPE")]
    job_type: Option<String>,
    /// How many jobs per page (the server caps it).
    #[arg(long)]
    limit: Option<u32>,
    /// Where to continue: the cursor the previous page printed.
    #[arg(long)]
    cursor: Option<String>,
    /// Print the raw page as JSON ({"items": […], "nextCursor": …}).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The job's id.
    id: JobId,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The job's id.
    id: JobId,
    /// Why; shown on the job and in its timeline.
    #[arg(long)]
    reason: Option<String>,
    /// Print the job as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The job's id.
    id: JobId,
    /// Only events after this event id.
    #[arg(long, value_name = "N")]
    after: Option<i64>,
    /// Keep streaming live events until the job succeeds, fails or is cancelled (or Ctrl-C).
    #[arg(long, short)]
    follow: bool,
    /// Print each event as one line of JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

impl JobsCommand {
    pub async fn run(self, out: &mut impl Write) -> Result<()> {
        match self {
            JobsCommand::List(args) => list(args, out).await,
            JobsCommand::Show(args) => {
                let job = args.client.client()?.get_job(&args.id).await?;
                if args.json {
                    writeln!(out, "{}", pretty(&job))?;
                } else {
                    write!(out, "{}", job_summary(&job))?;
                }
                Ok(())
            }
            JobsCommand::Cancel(args) => {
                let client = args.client.client()?;
                let job = client.cancel_job(&args.id, args.reason.as_deref()).await?;
                if args.json {
                    writeln!(out, "{}", pretty(&job))?;
                } else if job.status == JobState::Cancelled {
                    writeln!(out, "cancelled {}", job.id)?;
                } else {
                    writeln!(
                        out,
                        "cancel requested for {} ({}); its worker stops and acknowledges",
                        job.id, job.status
                    )?;
                }
                Ok(())
            }
            JobsCommand::Pause(args) => course::pause(args, out).await,
            JobsCommand::Resume(args) => course::resume(args, out).await,
            JobsCommand::Retry(args) => course::retry(args, out).await,
            JobsCommand::Budget(args) => course::budget(args, out).await,
            JobsCommand::FollowUp(args) => course::follow_up(args, out).await,
            JobsCommand::Append(args) => course::append(args, out).await,
            JobsCommand::Approve(args) => course::approve(args, out).await,
            JobsCommand::Reject(args) => course::reject(args, out).await,
            JobsCommand::Events(args) => events(args, out).await,
            JobsCommand::Checkpoints(args) => {
                let items = args.client.client()?.list_checkpoints(&args.id).await?;
                match args.json {
                    true => writeln!(out, "{}", pretty(&items))?,
                    false => write!(out, "{}", render::checkpoint_table(&items))?,
                }
                Ok(())
            }
        }
    }
}

async fn list(args: ListArgs, out: &mut impl Write) -> Result<()> {
    let client = args.client.client()?;
    let (jobs, next_cursor) = client
        .list_jobs(
            args.status,
            args.job_type.as_deref(),
            args.limit,
            args.cursor.as_deref(),
        )
        .await?;
    if args.json {
        let page = json!({ "items": jobs, "nextCursor": next_cursor });
        writeln!(out, "{}", pretty(&page))?;
        return Ok(());
    }
    if jobs.is_empty() {
        writeln!(out, "no jobs")?;
    } else {
        write!(out, "{}", job_table(&jobs))?;
    }
    if let Some(cursor) = next_cursor {
        writeln!(out, "next page: --cursor {cursor}")?;
    }
    Ok(())
}

async fn events(args: EventsArgs, out: &mut impl Write) -> Result<()> {
    let client = args.client.client()?;
    let print = |out: &mut dyn Write, event: &JobEvent| -> std::io::Result<()> {
        if args.json {
            writeln!(out, "{}", serde_json::to_string(event).unwrap_or_default())
        } else {
            writeln!(out, "{}", event_line(event))
        }
    };
    let job = client.get_job(&args.id).await?;
    if !args.follow || job.status.is_terminal() {
        let mut after = args.after;
        let mut printed = 0usize;
        loop {
            let page = client
                .list_events(&args.id, after, Some(EVENTS_PAGE))
                .await?;
            for event in &page {
                print(out, event)?;
            }
            printed += page.len();
            match page.last() {
                Some(last) if page.len() == EVENTS_PAGE as usize => after = Some(last.id),
                _ => break,
            }
        }
        if !args.json {
            if printed == 0 {
                writeln!(out, "no events")?;
            }
            if args.follow {
                writeln!(out, "job {} is {}", job.id, job.status)?;
            }
        }
        return Ok(());
    }
    follow(&client, &args.id, args.after, args.json, out, print).await
}

/// Streams until the job is terminal. Only `job.*` events change a job's state, so the
/// job is re-read on those alone.
async fn follow(
    client: &QueueClient,
    id: &JobId,
    after: Option<i64>,
    json: bool,
    out: &mut impl Write,
    print: impl Fn(&mut dyn Write, &JobEvent) -> std::io::Result<()>,
) -> Result<()> {
    let mut stream = client.stream_events(id, after);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let item = tokio::select! {
            _ = &mut interrupted => return Ok(()),
            item = stream.next() => item,
        };
        match item {
            Some(Ok(event)) => {
                print(out, &event)?;
                if event
                    .kind
                    .starts_with(contract::job::events::RESERVED_PREFIX)
                {
                    let job = client.get_job(id).await?;
                    if job.status.is_terminal() {
                        if !json {
                            writeln!(out, "job {} is {}", job.id, job.status)?;
                        }
                        return Ok(());
                    }
                }
            }
            // A refused token or a job that does not exist: the stream ends after this.
            Some(Err(error @ ClientError::Api { .. })) if !error.is_retryable() => {
                return Err(error.into());
            }
            Some(Err(error)) if error.is_retryable() => {
                eprintln!("stepwise: {error}; reconnecting");
            }
            Some(Err(error)) => eprintln!("stepwise: {error}"),
            None => return Err(JobsCliError::StreamEnded(id.to_string())),
        }
    }
}

/// A closed stdout (`stepwise jobs list | head`) is not a failure of the command.
pub fn ignore_broken_pipe(result: Result<()>) -> Result<()> {
    match result {
        Err(JobsCliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests;
