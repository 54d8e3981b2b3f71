//! `stepwise submit`: a task from a JSON job request (a file or stdin), or described with
//! flags, sent to the server; it answers with the job's id and its page.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args};
use contract::{
    CompletionInput, JobRequest, PublishMode, RuntimeInput, RuntimeMode, SkillSelection, StepInput,
};
use serde_json::Value;

use super::{ClientArgs, JobsCliError, Result, page_url, pretty, publish_parser, runtime_parser};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("request").required(true).args(["file", "repository"])))]
pub struct SubmitArgs {
    /// A JSON job request shaped like the README's example ({"type": "task", "payload":
    /// {…}}); `-` reads it from stdin. Or describe the task with the flags below instead.
    #[arg(value_name = "FILE")]
    pub(super) file: Option<PathBuf>,
    #[command(flatten)]
    pub(super) task: TaskFlags,
    /// Start the job no earlier than this time, with its offset
    /// (`2026-11-27T09:00:00Z`): it waits queued until then. Sent as the request's
    /// `notBefore`, over what a file gives.
    #[arg(long, value_name = "TIME")]
    pub(super) not_before: Option<String>,
    /// Wait for this job to succeed before starting (repeat for several): the job is
    /// queued, and cancelled if one of them fails. Sent as the request's `dependsOn`.
    #[arg(long = "depends-on", value_name = "JOB_ID")]
    pub(super) depends_on: Vec<String>,
    /// Print the whole job as JSON instead of a summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub(super) client: ClientArgs,
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
    /// Stop after the steps until an operator approves (`stepwise jobs approve`) before
    /// anything is published.
    #[arg(long, conflicts_with = "file")]
    require_approval: bool,
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
        task.publish.approval = self.require_approval.then(|| "required".to_string());
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
        let mut request = match &self.file {
            Some(path) => read_request(path)?,
            None => self.task.request(),
        };
        // The server reads and checks it, naming `notBefore` if it is no time.
        if let (Some(at), Some(fields)) = (&self.not_before, request.as_object_mut()) {
            fields.insert("notBefore".into(), Value::String(at.clone()));
        }
        if let (false, Some(fields)) = (self.depends_on.is_empty(), request.as_object_mut()) {
            fields.insert("dependsOn".into(), serde_json::json!(self.depends_on));
        }
        let client = self.client.client()?;
        let job = client.create_job(&request).await?;
        if self.json {
            writeln!(out, "{}", pretty(&job))?;
        } else if !job.waiting_for.is_empty() {
            let ids: Vec<String> = job.waiting_for.iter().map(ToString::to_string).collect();
            writeln!(
                out,
                "submitted {} ({}, waiting for {})",
                job.id,
                job.status,
                ids.join(", ")
            )?;
            writeln!(out, "{}", page_url(&client, &job.id))?;
        } else if job.next_attempt_at > job.created_at {
            writeln!(
                out,
                "submitted {} ({}, to start at {})",
                job.id,
                job.status,
                job.next_attempt_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )?;
            writeln!(out, "{}", page_url(&client, &job.id))?;
        } else {
            writeln!(out, "submitted {} ({})", job.id, job.status)?;
            writeln!(out, "{}", page_url(&client, &job.id))?;
        }
        Ok(())
    }
}

pub(in crate::cli) fn read_request(path: &Path) -> Result<Value> {
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
