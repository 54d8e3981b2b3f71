//! The job request a tool's arguments describe: the whole REST envelope as given, or one
//! built from the task's fields (`queue.enqueue`, `tasks.start`), which the server then
//! normalizes and checks like any other.

use contract::api::{ErrorBody, ErrorCode};
use contract::{CompletionInput, FieldError, JobRequest, PublishMode, RuntimeMode, StepInput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

#[derive(Debug, Default, Deserialize, JsonSchema)]
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
    // The job request laid flat, as `POST /api/queue/jobs` names its fields, instead of
    // under `request`: the envelope's, or the payload's own (with `repository` above).
    /// The job's type, `task` (the job request laid flat, as `POST /api/queue/jobs` takes
    /// it: give these instead of `request`, not with the fields above).
    #[serde(default, rename = "type")]
    pub job_type: Option<Value>,
    /// The job request laid flat: -1000 to 1000; higher runs first.
    #[serde(default)]
    pub priority: Option<Value>,
    /// The job request laid flat: 1 to 10 attempts.
    #[serde(default)]
    pub max_attempts: Option<Value>,
    /// The job request laid flat: jobs with one key prefer one worker.
    #[serde(default)]
    pub affinity_key: Option<Value>,
    /// The job request laid flat: an RFC 3339 time before which the job is not started.
    #[serde(default)]
    pub not_before: Option<Value>,
    /// The job request laid flat: the whole payload, `{"repository": "...", "task": {...}}`.
    #[serde(default)]
    pub payload: Option<Value>,
    /// The payload laid flat: the runtime (`codex`, `claude`, `gemini`).
    #[serde(default)]
    pub target_runtime: Option<Value>,
    /// The payload laid flat: the task, `{"instructions": "...", "steps": [...], ...}`.
    #[serde(default)]
    pub task: Option<Value>,
    /// The payload laid flat: the task's auth refs.
    #[serde(default)]
    pub auth: Option<Value>,
    /// The payload laid flat: capabilities the worker must have besides the derived ones.
    #[serde(default)]
    pub required_capabilities: Option<Value>,
    /// The jobs this one waits for, by id (`dependsOn`), with any of the ways above: it is
    /// queued, and no worker claims it before every one of them has succeeded; if one
    /// fails or is cancelled, it is cancelled too.
    #[serde(default)]
    pub depends_on: Option<Vec<String>>,
}

impl EnqueueArgs {
    /// Takes the fields of the job request laid flat: the envelope's, then the payload's,
    /// each under its wire name.
    fn take_flat(&mut self) -> (Map<String, Value>, Map<String, Value>) {
        let envelope = [
            ("type", self.job_type.take()),
            ("priority", self.priority.take()),
            ("maxAttempts", self.max_attempts.take()),
            ("affinityKey", self.affinity_key.take()),
            ("notBefore", self.not_before.take()),
            ("payload", self.payload.take()),
        ];
        let payload = [
            ("targetRuntime", self.target_runtime.take()),
            ("task", self.task.take()),
            ("auth", self.auth.take()),
            ("requiredCapabilities", self.required_capabilities.take()),
        ];
        fn collect<const N: usize>(fields: [(&str, Option<Value>); N]) -> Map<String, Value> {
            fields
                .into_iter()
                .filter_map(|(name, value)| Some((name.to_string(), value?)))
                .collect()
        }
        (collect(envelope), collect(payload))
    }
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
    mut args: EnqueueArgs,
    completion: Option<CompletionInput>,
) -> Result<Value, ErrorBody> {
    let depends_on = args.depends_on.take();
    let mut request = built_request(args, completion)?;
    if let (Some(ids), Some(fields)) = (depends_on, request.as_object_mut()) {
        if fields.contains_key("dependsOn") {
            return Err(ErrorBody::invalid(vec![FieldError::new(
                "dependsOn",
                "given twice: in `request` and beside it; give it once",
            )]));
        }
        fields.insert("dependsOn".into(), json!(ids));
    }
    Ok(request)
}

fn built_request(
    mut args: EnqueueArgs,
    completion: Option<CompletionInput>,
) -> Result<Value, ErrorBody> {
    let (envelope, flat_payload) = args.take_flat();
    let laid_flat = !envelope.is_empty() || !flat_payload.is_empty();
    let fields_given = [
        ("repository", args.repository.is_some() && !laid_flat),
        ("objective", args.objective.is_some()),
        ("steps", args.steps.is_some()),
        ("runtime", args.runtime.is_some()),
        ("model", args.model.is_some()),
        ("effort", args.effort.is_some()),
        ("publish", args.publish.is_some()),
    ];
    let conflicts = |why: &str, extra: Vec<&str>| -> Vec<FieldError> {
        fields_given
            .iter()
            .filter(|(_, given)| *given)
            .map(|(name, _)| *name)
            .chain(extra)
            .map(|name| FieldError::new(name, why))
            .collect()
    };
    if let Some(request) = args.request {
        let flat: Vec<&str> = envelope
            .keys()
            .chain(flat_payload.keys())
            .map(String::as_str)
            .collect();
        let errors = conflicts("give either `request` or the task's fields, not both", flat);
        if !errors.is_empty() {
            return Err(ErrorBody::invalid(errors));
        }
        return Ok(request);
    }
    if laid_flat {
        let errors = conflicts(
            "give either the job request laid flat (payload, or repository with targetRuntime and task) or the task's fields (objective, steps, runtime, ...), not both",
            Vec::new(),
        );
        if !errors.is_empty() {
            return Err(ErrorBody::invalid(errors));
        }
        return flat_request(envelope, flat_payload, args.repository);
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

/// The request the flat fields make: the envelope as given, its payload either given
/// whole or made of the payload's own fields.
fn flat_request(
    mut envelope: Map<String, Value>,
    flat_payload: Map<String, Value>,
    repository: Option<String>,
) -> Result<Value, ErrorBody> {
    let mut payload = flat_payload;
    if let Some(repository) = repository {
        payload.insert("repository".into(), Value::String(repository));
    }
    if !payload.is_empty() {
        if envelope.contains_key("payload") {
            let errors = payload
                .keys()
                .map(|name| {
                    FieldError::new(
                        name.clone(),
                        "belongs inside `payload`, which is given too: give it there, or leave `payload` out",
                    )
                })
                .collect();
            return Err(ErrorBody::invalid(errors));
        }
        envelope.insert("payload".into(), Value::Object(payload));
    }
    Ok(Value::Object(envelope))
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
