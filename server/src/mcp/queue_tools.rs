//! The tools people's agents use: submit a task, read jobs, their events and artifacts,
//! cancel. Each is a thin call through the desk, answered as a summary line plus the
//! structured value; a refusal is a tool error with the REST API's code.

use contract::api::ErrorBody;
use contract::{FieldError, JobEvent, JobState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::desk::{internal, parse_id};
use super::handler::{Stepwise, answer, refused, reply};
use super::request::{EnqueueArgs, job_request};
use super::summary::{JobView, Progress, job_view, line};
use super::tasks;

/// The most of an artifact `queue.artifact` returns, and its default.
const MAX_ARTIFACT_BYTES: u64 = 1 << 20;
const DEFAULT_ARTIFACT_BYTES: u64 = 64 << 10;
const DEFAULT_EVENTS: u32 = 100;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobArgs {
    /// The job's id (a UUID, as queue.enqueue and queue.list answer it).
    pub job_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListArgs {
    /// Only jobs in this state: queued, running, succeeded, failed, cancelled or dead_letter.
    #[serde(default)]
    pub status: Option<String>,
    /// How many jobs, newest first (1 to 200; 50 when left out).
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `nextCursor` of the previous page, to read the next one.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsArgs {
    /// The job's id.
    pub job_id: String,
    /// Only events after this event id (the `next` of the previous answer); 0 or left out
    /// reads from the start.
    #[serde(default)]
    pub after: Option<i64>,
    /// How many events at most (1 to 1000; 100 when left out).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelArgs {
    /// The job's id.
    pub job_id: String,
    /// Why, shown on the job; optional.
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactArgs {
    /// The job's id.
    pub job_id: String,
    /// The artifact's name, as queue.artifacts lists it (for example `logs/steps/step-0001.log`
    /// or `patches/changes.patch`).
    pub name: String,
    /// How many bytes to return at most (1 to 1048576; 65536 when left out). A longer
    /// artifact is cut and says so.
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

#[tool_router(router = queue_tools, vis = "pub(super)")]
impl Stepwise {
    /// Submit a coding-agent task to the queue and get its job back. A task is an objective
    /// and an ordered list of steps, each run as one agent invocation in the same
    /// workspace, then published once. Put every action the user asked for in its own
    /// step, in order; do not merge two actions into one step or leave one out.
    #[tool(
        name = "queue.enqueue",
        annotations(destructive_hint = false, open_world_hint = true)
    )]
    async fn enqueue(
        &self,
        Parameters(args): Parameters<EnqueueArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let desk = self.desk(&ctx)?;
        let submitted = async {
            let request = job_request(args, None)?;
            let job = desk.submit(&request).await?;
            let progress = Progress::of(&job, &[]);
            Ok(JobView::new(job, progress.as_ref()).linked(&desk))
        }
        .await;
        match submitted {
            // A client that reads tasks follows the job as one, by its id.
            Ok(view) if tasks::client_reads_tasks(&ctx) => {
                Ok(CallToolResponse::Task(tasks::created(&view)))
            }
            Ok(view) => {
                answer(format!("queued: {}", view.summary), &view).map(CallToolResponse::Complete)
            }
            Err(error) => refused(error).map(CallToolResponse::Complete),
        }
    }

    /// Read one job: a summary line ("job … running, step 2/3: …"), the job, and each
    /// step's title and state.
    #[tool(name = "queue.get", annotations(read_only_hint = true))]
    async fn get(
        &self,
        Parameters(args): Parameters<JobArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(async { show(job_view(&desk, &parse_id(&args.job_id)?).await?) }.await)
    }

    /// List jobs, newest first, optionally only those in one state; pages with `cursor`.
    #[tool(name = "queue.list", annotations(read_only_hint = true))]
    async fn list(
        &self,
        Parameters(args): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let status = parse_status(args.status.as_deref())?;
                let (jobs, next_cursor) = desk.jobs(status, args.limit, args.cursor).await?;
                let mut text: Vec<String> = jobs.iter().map(|job| line(job, None)).collect();
                if text.is_empty() {
                    text.push("no jobs".to_string());
                }
                if next_cursor.is_some() {
                    text.push("more: call again with cursor = nextCursor".to_string());
                }
                answer(
                    text.join("\n"),
                    &json!({ "items": jobs, "nextCursor": next_cursor }),
                )
                .map_err(internal)
            }
            .await,
        )
    }

    /// Read a job's timeline, oldest first: the queue's transitions, each step's start and
    /// end, and the agent's log lines. Pass `after` = the previous answer's `next` to read on.
    #[tool(name = "queue.events", annotations(read_only_hint = true))]
    async fn events(
        &self,
        Parameters(args): Parameters<EventsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.job_id)?;
                let after = args.after.unwrap_or(0);
                let limit = args.limit.unwrap_or(DEFAULT_EVENTS);
                let items = desk.events(&id, after, limit).await?;
                let next = items.last().map_or(after, |e| e.id);
                let mut text: Vec<String> = items.iter().map(event_line).collect();
                text.push(format!("next: {next}"));
                answer(text.join("\n"), &json!({ "items": items, "next": next })).map_err(internal)
            }
            .await,
        )
    }

    /// Cancel a job, as the dashboard's cancel does: a queued job is cancelled at once; a
    /// running one is asked to stop and its worker stops the running step. Cancelling a
    /// cancelled job changes nothing; a job that already ended otherwise is refused.
    #[tool(
        name = "queue.cancel",
        annotations(destructive_hint = true, idempotent_hint = true)
    )]
    async fn cancel(
        &self,
        Parameters(args): Parameters<CancelArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.job_id)?;
                let reason = args.reason.as_deref().filter(|r| !r.trim().is_empty());
                let job = desk.cancel(&id, reason).await?;
                show(JobView::new(job, None).linked(&desk))
            }
            .await,
        )
    }

    /// List a job's artifacts: step logs, patches, the task context, the publish result.
    #[tool(name = "queue.artifacts", annotations(read_only_hint = true))]
    async fn artifacts(
        &self,
        Parameters(args): Parameters<JobArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let items = desk.artifacts(&parse_id(&args.job_id)?).await?;
                let mut text: Vec<String> = items
                    .iter()
                    .map(|a| format!("{} ({} bytes, {})", a.name, a.size, a.content_type))
                    .collect();
                if text.is_empty() {
                    text.push("no artifacts yet".to_string());
                }
                answer(text.join("\n"), &json!({ "items": items })).map_err(internal)
            }
            .await,
        )
    }

    /// Read one artifact by name, as text, up to `maxBytes`.
    #[tool(name = "queue.artifact", annotations(read_only_hint = true))]
    async fn artifact(
        &self,
        Parameters(args): Parameters<ArtifactArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.job_id)?;
                let max = match args.max_bytes {
                    None => DEFAULT_ARTIFACT_BYTES,
                    Some(n) if (1..=MAX_ARTIFACT_BYTES).contains(&n) => n,
                    Some(_) => {
                        return Err(ErrorBody::invalid(vec![FieldError::new(
                            "maxBytes",
                            format!("must be between 1 and {MAX_ARTIFACT_BYTES}"),
                        )]));
                    }
                };
                let read = desk.artifact(&id, &args.name, max).await?;
                let text = String::from_utf8_lossy(&read.bytes).into_owned();
                let head = format!(
                    "{} ({} bytes{})",
                    read.artifact.name,
                    read.artifact.size,
                    if read.truncated {
                        format!(", the first {max} shown")
                    } else {
                        String::new()
                    }
                );
                answer(
                    format!("{head}\n{text}"),
                    &json!({ "artifact": read.artifact, "text": text, "truncated": read.truncated }),
                )
                .map_err(internal)
            }
            .await,
        )
    }
}

/// A job as a tool's answer: its summary line, and the view as structured content.
pub(super) fn show(view: JobView) -> Result<CallToolResult, ErrorBody> {
    answer(view.summary.clone(), &view).map_err(internal)
}

fn parse_status(text: Option<&str>) -> Result<Option<JobState>, ErrorBody> {
    match text.map(str::trim) {
        None | Some("") => Ok(None),
        Some(s) => s.parse::<JobState>().map(Some).map_err(|_| {
            let accepted: Vec<_> = JobState::ALL.iter().map(|s| s.as_str()).collect();
            ErrorBody::invalid(vec![FieldError::new(
                "status",
                format!("unknown status; use one of {}", accepted.join(", ")),
            )])
        }),
    }
}

/// `#12 task.step.started [info] Step 1 started`.
fn event_line(event: &JobEvent) -> String {
    format!(
        "#{} {} [{}] {}",
        event.id, event.kind, event.level, event.message
    )
}
