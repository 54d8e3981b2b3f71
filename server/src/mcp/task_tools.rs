//! Seed 003's operations on tasks, as tools: start one with its completion criteria and
//! check, read its status, list them, cancel one. A task is a job, answered in seed 003's
//! task shape (the resource `stepwise://tasks/{id}`).

use contract::api::ErrorBody;
use contract::api::resources::TaskResource;
use contract::{CompletionInput, FieldError};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::desk::{internal, parse_id};
use super::handler::{Stepwise, answer, refused, reply};
use super::request::{EnqueueArgs, StepsArg, job_request};
use super::resources::{task_resource, task_status};
use super::summary::{JobView, Progress};
use super::tasks;

/// How many tasks `tasks.list` reads when not told, and at most.
const DEFAULT_LIST: u32 = 20;
const MAX_LIST: u32 = 50;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartArgs {
    /// What the task is for; every step's prompt starts with it.
    pub objective: String,
    /// What "done" means, in words (seed 003's completion_criteria), shown with the task.
    #[serde(default)]
    pub completion_criteria: Option<String>,
    /// How many more times the agent may run, after the steps, while the check fails (1 to
    /// 200; 10 when left out).
    #[serde(default)]
    pub max_iterations: Option<u32>,
    /// The check: a shell command run in the repository after the steps, passing on exit
    /// code 0 (`cargo test`, `npm test`). While it fails, the agent runs again with its
    /// output. Without one, nothing checks the criteria.
    #[serde(default)]
    pub check_command: Option<String>,
    /// A regular expression the check's output must also match to pass.
    #[serde(default)]
    pub output_pattern: Option<String>,
    /// How long one run of the check may take, in seconds (1 to 3600; 600 when left out).
    #[serde(default)]
    pub check_timeout_seconds: Option<u32>,
    /// The git repository to work in (the server's default when left out).
    #[serde(default)]
    pub repository: Option<String>,
    /// The steps, in order: a list of instructions or a markdown checklist. Put every
    /// action the user asked for in its own step; none runs the objective as one step.
    #[serde(default)]
    pub steps: Option<StepsArg>,
    /// The agent CLI: `codex`, `claude` or `gemini` (the server's default when left out).
    #[serde(default)]
    pub runtime: Option<String>,
    /// The model the agent uses; the runtime's default when left out.
    #[serde(default)]
    pub model: Option<String>,
    /// What happens to the changes at the end: `none`, `branch` or `pr`.
    #[serde(default)]
    pub publish: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskArgs {
    /// The task's id (the job's id, a UUID).
    pub task_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskListArgs {
    /// Only tasks in this state: pending, running, completed, failed or cancelled.
    #[serde(default)]
    pub status: Option<String>,
    /// How many tasks, newest first (1 to 50; 20 when left out).
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `nextCursor` of the previous answer, to read on.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskCancelArgs {
    /// The task's id.
    pub task_id: String,
    /// Why, shown on the task; optional.
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskPauseArgs {
    /// The task's id.
    pub task_id: String,
    /// Stop the running step now, losing its work since the last checkpoint, rather than
    /// pausing after it finishes (the default).
    #[serde(default)]
    pub immediate: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskResumeArgs {
    /// The task's id.
    pub task_id: String,
    /// The checkpoint to resume from (`step-2`, `iteration-1`, as the task's
    /// `progress.checkpoints` lists them); the one it paused at when left out.
    #[serde(default)]
    pub checkpoint: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskRetryArgs {
    /// The task's id.
    pub task_id: String,
    /// The step to run again first, numbered from 1; the work before it is restored from
    /// its checkpoint. The step that failed when left out.
    #[serde(default)]
    pub from_step: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskApproveArgs {
    /// The task's id.
    pub task_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskRejectArgs {
    /// The task's id.
    pub task_id: String,
    /// Why; it becomes the task's error.
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskAppendArgs {
    /// The task's id.
    pub task_id: String,
    /// The steps to add after the task's own: a list of instructions or a markdown
    /// checklist. A task awaiting approval goes back to run them, then asks again.
    pub steps: StepsArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskFollowUpArgs {
    /// The task's id: one that completed or failed.
    pub task_id: String,
    /// What to do next, as the round's steps: a list of instructions or a markdown
    /// checklist. The round runs only these, from the work the task last pushed.
    pub steps: StepsArg,
}

/// A tool's steps as the API takes them: one object per instruction, or the checklist.
fn steps_value(steps: StepsArg) -> serde_json::Value {
    match steps {
        StepsArg::List(items) => json!(
            items
                .into_iter()
                .map(|instructions| json!({ "instructions": instructions }))
                .collect::<Vec<_>>()
        ),
        StepsArg::Checklist(text) => json!(text),
    }
}

#[tool_router(router = task_tools, vis = "pub(super)")]
impl Stepwise {
    /// Start a task (seed 003): an objective with its completion criteria, as a job in
    /// the queue. Put every action the user asked for in its own step. Answers the task in
    /// seed 003's shape; follow it with tasks.status.
    #[tool(
        name = "tasks.start",
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn start(
        &self,
        Parameters(args): Parameters<StartArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let desk = self.desk(&ctx)?;
        let started = async {
            if args.objective.trim().is_empty() {
                return Err(ErrorBody::invalid(vec![FieldError::new(
                    "objective",
                    "required: what the task is for",
                )]));
            }
            let no_check = args.check_command.as_deref().is_none_or(|c| c.trim().is_empty());
            if args.max_iterations.is_some() && no_check {
                // Named as this tool names them; the contract refuses the same, by its paths.
                return Err(ErrorBody::invalid(vec![FieldError::new(
                    "maxIterations",
                    "needs checkCommand: only a failing check runs the agent again, so without                      one the limit would do nothing; give checkCommand too, or leave maxIterations out",
                )]));
            }
            let completion = CompletionInput {
                criteria: args.completion_criteria,
                max_iterations: args.max_iterations,
                command: args.check_command,
                output_pattern: args.output_pattern,
                timeout_seconds: args.check_timeout_seconds,
            };
            let fields = EnqueueArgs {
                request: None,
                repository: args.repository,
                objective: Some(args.objective),
                steps: args.steps,
                runtime: args.runtime,
                model: args.model,
                effort: None,
                publish: args.publish,
                ..EnqueueArgs::default()
            };
            let job = desk.submit(&job_request(fields, Some(completion))?).await?;
            let task = task_resource(&desk, &job, false).await?;
            let progress = Progress::of(&job, &[]);
            Ok((task, JobView::new(job, progress.as_ref()).linked(&desk)))
        }
        .await;
        match started {
            Ok((_, view)) if tasks::client_reads_tasks(&ctx) => {
                Ok(CallToolResponse::Task(tasks::created(&view)))
            }
            Ok((task, _)) => show_task(task).map(CallToolResponse::Complete),
            Err(error) => refused(error).map(CallToolResponse::Complete),
        }
    }

    /// A task's status in seed 003's shape: state (iteration, status, last action, next
    /// steps, error), progress (percentage, artifacts) and metadata.
    #[tool(name = "tasks.status", annotations(read_only_hint = true))]
    async fn status(
        &self,
        Parameters(args): Parameters<TaskArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let job = desk.job(&parse_id(&args.task_id)?).await?;
                show_task(task_resource(&desk, &job, true).await?).map_err(internal)
            }
            .await,
        )
    }

    /// List tasks, newest first, optionally only those in one state; pages with `cursor`.
    #[tool(name = "tasks.list", annotations(read_only_hint = true))]
    async fn list_tasks(
        &self,
        Parameters(args): Parameters<TaskListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let status = task_status(args.status.as_deref().unwrap_or_default())
                    .map_err(|e| ErrorBody::invalid(vec![FieldError::new("status", e)]))?;
                let limit = match args.limit {
                    None => DEFAULT_LIST,
                    Some(n) if (1..=MAX_LIST).contains(&n) => n,
                    Some(_) => {
                        return Err(ErrorBody::invalid(vec![FieldError::new(
                            "limit",
                            format!("must be between 1 and {MAX_LIST}"),
                        )]));
                    }
                };
                let (jobs, next_cursor) = desk.jobs(status, Some(limit), args.cursor).await?;
                let mut items = Vec::with_capacity(jobs.len());
                for job in &jobs {
                    items.push(task_resource(&desk, job, false).await?);
                }
                let mut text: Vec<String> =
                    items.iter().map(|t| t.progress.message.clone()).collect();
                if text.is_empty() {
                    text.push("no tasks".to_string());
                }
                answer(
                    text.join("\n"),
                    &json!({ "items": items, "nextCursor": next_cursor }),
                )
                .map_err(internal)
            }
            .await,
        )
    }

    /// Cancel a task, as queue.cancel does: at once when pending; a running one is asked
    /// to stop and its worker stops the running step.
    #[tool(
        name = "tasks.cancel",
        annotations(destructive_hint = true, idempotent_hint = true)
    )]
    async fn cancel_task_tool(
        &self,
        Parameters(args): Parameters<TaskCancelArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.task_id)?;
                let reason = args.reason.as_deref().filter(|r| !r.trim().is_empty());
                let job = desk.cancel(&id, reason).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }
}

#[tool_router(router = course_tools, vis = "pub(super)")]
impl Stepwise {
    /// Pause a task: a pending one at once; a running one stops after its running step
    /// (or at once with `immediate`) and waits, its work kept in a checkpoint, until
    /// `tasks.resume`.
    #[tool(name = "tasks.pause", annotations(idempotent_hint = true))]
    async fn pause_task_tool(
        &self,
        Parameters(args): Parameters<TaskPauseArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.task_id)?;
                let job = desk.pause(&id, args.immediate).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }

    /// Resume a paused task from its checkpoint (or another one it lists): it continues
    /// at the next step, nothing done before is run again.
    #[tool(name = "tasks.resume", annotations(idempotent_hint = true))]
    async fn resume_task_tool(
        &self,
        Parameters(args): Parameters<TaskResumeArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.task_id)?;
                let checkpoint = args.checkpoint.as_deref().filter(|c| !c.trim().is_empty());
                let job = desk.resume(&id, checkpoint).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }

    /// Approve a task awaiting approval: its kept work is published; no step runs again.
    #[tool(name = "tasks.approve", annotations(idempotent_hint = true))]
    async fn approve_task_tool(
        &self,
        Parameters(args): Parameters<TaskApproveArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let job = desk.approve(&parse_id(&args.task_id)?).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }

    /// Reject a task awaiting approval: it fails with the reason, nothing is published.
    #[tool(name = "tasks.reject", annotations(destructive_hint = true))]
    async fn reject_task_tool(
        &self,
        Parameters(args): Parameters<TaskRejectArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.task_id)?;
                let reason = args.reason.as_deref().filter(|r| !r.trim().is_empty());
                let job = desk.reject(&id, reason).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }

    /// Add steps after a task's own, checked as at start: a pending or paused task runs
    /// them with the rest, a running one after its current steps (refused once they have
    /// all run), and one awaiting approval goes back to run them.
    #[tool(name = "tasks.append")]
    async fn append_task_tool(
        &self,
        Parameters(args): Parameters<TaskAppendArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.task_id)?;
                let job = desk.append_steps(&id, &steps_value(args.steps)).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }

    /// Follow up on a task that completed or failed, as the same task: its next round runs
    /// only these steps, from the work it last pushed (or its latest checkpoint), and
    /// publishes to the same branch and pull request. Its progress says the round.
    #[tool(name = "tasks.follow_up")]
    async fn follow_up_task_tool(
        &self,
        Parameters(args): Parameters<TaskFollowUpArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.task_id)?;
                let job = desk.follow_up(&id, &steps_value(args.steps)).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }

    /// Run a failed or cancelled task again from a step (the one that failed by default),
    /// the work of the steps before it restored from their checkpoint.
    #[tool(name = "tasks.retry")]
    async fn retry_task_tool(
        &self,
        Parameters(args): Parameters<TaskRetryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.task_id)?;
                let from = match args.from_step {
                    Some(0) => {
                        return Err(ErrorBody::invalid(vec![FieldError::new(
                            "fromStep",
                            "steps are numbered from 1",
                        )]));
                    }
                    other => other.map(|n| n - 1),
                };
                let job = desk.retry(&id, from).await?;
                show_task(task_resource(&desk, &job, false).await?).map_err(internal)
            }
            .await,
        )
    }
}

/// A task as a tool's answer: its progress message, and the task as structured content.
fn show_task(task: TaskResource) -> Result<CallToolResult, ErrorData> {
    answer(task.progress.message.clone(), &task)
}
