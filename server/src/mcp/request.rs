//! The job request a tool's arguments describe: the whole REST envelope as given, or one
//! built from the task's fields (`queue.enqueue`, `tasks.start`), which the server then
//! normalizes and checks like any other.

use contract::api::{ErrorBody, ErrorCode};
use contract::{CompletionInput, FieldError, JobRequest, PublishMode, RuntimeMode, StepInput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnqueueArgs {
    /// The whole job request as `POST /api/queue/jobs` takes it, for full control:
    /// `{"type": "task", "payload": {"repository": "...", "task": {"instructions": "...", "steps": [...]}}}`.
    /// Give either this or the fields below, not both.
    #[serde(default)]
    pub request: Option<Value>,
    /// The git repository to work in, as the task form takes it (for example `owner/name`
    /// or a clone URL). The server's default when left out.
    #[serde(default)]
    pub repository: Option<String>,
    /// The task's objective: what the whole task is for. Every step's prompt starts with it.
    #[serde(default)]
    pub objective: Option<String>,
    /// The steps, in order: a list of instructions, one per step, or a markdown checklist
    /// with one `- [ ] ...` line per step. Put every action the user asked for in its own
    /// step; an empty list runs the objective as one step.
    #[serde(default)]
    pub steps: Option<StepsArg>,
    /// The agent CLI that runs the steps: `codex`, `claude` or `gemini`. The server's
    /// default when left out.
    #[serde(default)]
    pub runtime: Option<String>,
    /// The model the agent uses; the runtime's default when left out.
    #[serde(default)]
    pub model: Option<String>,
    /// The reasoning effort, as the runtime names its levels (for example `low`, `medium`, `high`).
    #[serde(default)]
    pub effort: Option<String>,
    /// What happens to the changes at the end: `none`, `branch` or `pr`.
    #[serde(default)]
    pub publish: Option<String>,
}

/// Steps as a list or as a markdown checklist.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StepsArg {
    /// One entry per step: that step's instructions.
    List(Vec<String>),
    /// A markdown checklist: `- [ ] ...` per step; blank lines and `#` headings are ignored.
    Checklist(String),
}

/// The job request the arguments describe: `request` as given, or one built from the
/// fields, which the server normalizes and checks like any other.
pub(super) fn job_request(
    args: EnqueueArgs,
    completion: Option<CompletionInput>,
) -> Result<Value, ErrorBody> {
    let fields_given = [
        ("repository", args.repository.is_some()),
        ("objective", args.objective.is_some()),
        ("steps", args.steps.is_some()),
        ("runtime", args.runtime.is_some()),
        ("model", args.model.is_some()),
        ("effort", args.effort.is_some()),
        ("publish", args.publish.is_some()),
    ];
    if let Some(request) = args.request {
        let errors: Vec<FieldError> = fields_given
            .iter()
            .filter(|(_, given)| *given)
            .map(|(name, _)| {
                FieldError::new(
                    *name,
                    "give either `request` or the task's fields, not both",
                )
            })
            .collect();
        if !errors.is_empty() {
            return Err(ErrorBody::invalid(errors));
        }
        return Ok(request);
    }
    let mut errors = Vec::new();
    let mut request = JobRequest::default();
    request.payload.repository = args.repository.unwrap_or_default();
    let task = &mut request.payload.task;
    task.instructions = args.objective.unwrap_or_default();
    task.runtime.mode = parse_mode::<RuntimeMode>("runtime", args.runtime, &mut errors);
    task.runtime.model = args.model;
    task.runtime.effort = args.effort;
    task.publish.mode = parse_mode::<PublishMode>("publish", args.publish, &mut errors);
    task.completion = completion;
    if !errors.is_empty() {
        return Err(ErrorBody::invalid(errors));
    }
    let checklist = match args.steps {
        None => None,
        Some(StepsArg::List(items)) => {
            task.steps = items
                .into_iter()
                .map(|instructions| StepInput {
                    instructions: Some(instructions),
                    ..StepInput::default()
                })
                .collect();
            None
        }
        Some(StepsArg::Checklist(text)) => Some(text),
    };
    let mut request = serde_json::to_value(&request)
        .map_err(|e| ErrorBody::new(ErrorCode::InternalError, e.to_string()))?;
    // The server reads a checklist where the list of steps goes and says which line is
    // wrong, so it is sent as written.
    if let Some(text) = checklist {
        request["payload"]["task"]["steps"] = Value::String(text);
    }
    Ok(request)
}

/// A closed choice read from text; an unknown one is a field error listing the choices.
fn parse_mode<T>(field: &str, text: Option<String>, errors: &mut Vec<FieldError>) -> Option<T>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let text = text.filter(|t| !t.trim().is_empty())?;
    match text.trim().parse::<T>() {
        Ok(value) => Some(value),
        Err(e) => {
            errors.push(FieldError::new(field, e.to_string()));
            None
        }
    }
}
