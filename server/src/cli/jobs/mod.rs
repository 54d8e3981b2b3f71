//! `stepwise submit` and `stepwise jobs …`: the queue from a terminal. These commands talk
//! to a running server over its HTTP API through [`QueueClient`], like every other client,
//! so they work from any machine that has a token and never open the database.

mod render;

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgGroup, Args, Subcommand};
use contract::{
    CompletionInput, JobEvent, JobId, JobRequest, JobState, PublishMode, RuntimeInput, RuntimeMode,
    SkillSelection, StepInput,
};
use futures_util::StreamExt;
use serde_json::{Value, json};
use worker::client::{ClientError, QueueClient};

pub use render::{event_line, job_summary, job_table};

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
    fn client(&self) -> Result<QueueClient> {
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

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("request").required(true).args(["file", "repository"])))]
pub struct SubmitArgs {
    /// A JSON job request shaped like the README's example ({"type": "task", "payload":
    /// {…}}); `-` reads it from stdin. Or describe the task with the flags below instead.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    task: TaskFlags,
    /// Print the whole job as JSON instead of a summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

/// A task described on the command line. Only what is given is sent: the server fills
/// the rest from its defaults (STEPWISE_DEFAULT_RUNTIME, STEPWISE_DEFAULT_PUBLISH_MODE, …).
#[derive(Debug, Default, Args)]
pub struct TaskFlags {
    /// The git repository to work on (owner/name or a clone URL).
    #[arg(long, requires = "objective", conflicts_with = "file")]
    repository: Option<String>,
    /// The task objective: what the agent should achieve; every step's prompt starts with it.
    #[arg(
        long,
        value_name = "TEXT",
        requires = "repository",
        conflicts_with = "file"
    )]
    objective: Option<String>,
    /// One step's instructions; repeat for more steps, run in order. Without any, the
    /// task runs as one step.
    #[arg(long = "step", value_name = "TEXT", conflicts_with = "file")]
    steps: Vec<String>,
    /// The agent CLI that runs every step.
    #[arg(long, value_parser = runtime_parser(), conflicts_with = "file")]
    runtime: Option<RuntimeMode>,
    /// The model the runtime uses.
    #[arg(long, conflicts_with = "file")]
    model: Option<String>,
    /// The reasoning effort (codex: low…ultra, claude: low…max, gemini: low…high).
    #[arg(long, conflicts_with = "file")]
    effort: Option<String>,
    /// What happens to the changes once every step succeeded.
    #[arg(long, value_parser = publish_parser(), conflicts_with = "file")]
    publish: Option<PublishMode>,
    /// The skill the task uses (`auto` lets the agent decide).
    #[arg(long = "skill", value_name = "ID", conflicts_with = "file")]
    skill: Option<String>,
    /// What "done" means, in words (shown with the task).
    #[arg(long, value_name = "TEXT", conflicts_with = "file")]
    criteria: Option<String>,
    /// The completion check: a shell command run in the repository after the steps
    /// (`cargo test`); while it fails, the agent runs again with its output.
    #[arg(long = "check", value_name = "COMMAND", conflicts_with = "file")]
    check: Option<String>,
    /// A regular expression the check's output must also match to pass.
    #[arg(
        long,
        value_name = "REGEX",
        requires = "check",
        conflicts_with = "file"
    )]
    output_pattern: Option<String>,
    /// How long one run of the check may take, in seconds (default 600).
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "check",
        conflicts_with = "file"
    )]
    check_timeout: Option<u32>,
    /// How many more times the agent may run while the check fails (default 10).
    #[arg(long, value_name = "N", conflicts_with = "file")]
    max_iterations: Option<u32>,
}

impl TaskFlags {
    /// The job request these flags describe, leaving out everything not given.
    pub fn request(&self) -> Value {
        let mut request = JobRequest::default();
        request.payload.repository = self.repository.clone().unwrap_or_default();
        let task = &mut request.payload.task;
        task.instructions = self.objective.clone().unwrap_or_default();
        task.steps = self
            .steps
            .iter()
            .map(|step| StepInput {
                instructions: Some(step.clone()),
                ..StepInput::default()
            })
            .collect();
        task.runtime = RuntimeInput {
            mode: self.runtime,
            model: self.model.clone(),
            effort: self.effort.clone(),
        };
        task.publish.mode = self.publish;
        task.skill = self.skill.as_ref().map(|id| SkillSelection {
            id: id.clone(),
            ..SkillSelection::default()
        });
        let completion = CompletionInput {
            criteria: self.criteria.clone(),
            max_iterations: self.max_iterations,
            command: self.check.clone(),
            output_pattern: self.output_pattern.clone(),
            timeout_seconds: self.check_timeout,
        };
        task.completion = Some(completion).filter(|c| *c != CompletionInput::default());
        serde_json::to_value(&request).unwrap_or_default()
    }
}

impl SubmitArgs {
    pub async fn run(self, out: &mut impl Write) -> Result<()> {
        let request = match &self.file {
            Some(path) => read_request(path)?,
            None => self.task.request(),
        };
        let client = self.client.client()?;
        let job = client.create_job(&request).await?;
        if self.json {
            writeln!(out, "{}", pretty(&job))?;
        } else {
            writeln!(out, "submitted {} ({})", job.id, job.status)?;
            writeln!(out, "{}", page_url(&client, &job.id))?;
        }
        Ok(())
    }
}

fn read_request(path: &Path) -> Result<Value> {
    let (name, text) = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|error| JobsCliError::Read {
                path: "stdin".into(),
                error,
            })?;
        ("stdin".to_string(), text)
    } else {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| JobsCliError::Read {
            path: name.clone(),
            error,
        })?;
        (name, text)
    };
    serde_json::from_str(&text).map_err(|error| JobsCliError::Json { path: name, error })
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
