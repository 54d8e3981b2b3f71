//! Jobs as MCP tasks (the `io.modelcontextprotocol/tasks` extension), for clients that
//! declare it: `queue.enqueue` answers with a task whose id is the job id, and
//! `tasks/get`, `tasks/cancel` and `tasks/update` read and drive the job itself. Nothing
//! is kept in memory, so a task outlives a restart and any replica answers for it.

use contract::api::ErrorBody;
use contract::{Job, JobId, JobState};
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;

use super::desk::Desk;
use super::summary::job_view;
use super::summary::{ArtifactLink, JobView};

/// How often a client is asked to poll `tasks/get`.
const POLL_MS: u64 = 2000;

/// Whether the caller of this request reads tasks.
pub fn client_reads_tasks(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

/// The task a job just made is.
pub fn created(view: &JobView) -> CreateTaskResult {
    CreateTaskResult::new(task(&view.job, &view.summary))
}

pub async fn get(desk: &Desk, task_id: &str) -> Result<GetTaskResult, ErrorData> {
    let id = id(task_id)?;
    let mut view = job_view(desk, &id).await.map_err(unknown(task_id))?;
    if view.job.status.is_terminal() {
        // The final result links the job's page and each of its artifacts.
        let artifacts = desk.artifacts(&id).await.map_err(unknown(task_id))?;
        view.artifacts = Some(artifacts.iter().map(ArtifactLink::of).collect());
    }
    let task = task(&view.job, &view.summary);
    let payload = match view.job.status {
        // Paused, or awaiting approval, waits for an operator, not for the client: still
        // working, as its status message says.
        JobState::Queued | JobState::Running | JobState::Paused | JobState::AwaitingApproval => {
            TaskPayload::Working
        }
        JobState::Cancelled => TaskPayload::Cancelled,
        // A job that failed is a tool call that completed with an error: `Failed` is for
        // a call that could not be carried out at all (a JSON-RPC error).
        JobState::Succeeded | JobState::Failed | JobState::DeadLetter => TaskPayload::Completed {
            result: result(&view)?,
        },
    };
    Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
}

/// Cancels the job as `queue.cancel` does; the task reads `cancelled` once the worker has
/// stopped it.
pub async fn cancel(desk: &Desk, task_id: &str) -> Result<(), ErrorData> {
    desk.cancel(&id(task_id)?, None)
        .await
        .map_err(unknown(task_id))?;
    Ok(())
}

/// Stepwise never asks a client for input, so there is nothing to update: only whether
/// the caller may see the task is checked.
pub async fn update(desk: &Desk, task_id: &str) -> Result<(), ErrorData> {
    desk.job(&id(task_id)?).await.map_err(unknown(task_id))?;
    Ok(())
}

fn task(job: &Job, summary: &str) -> Task {
    let status = match job.status {
        JobState::Queued | JobState::Running | JobState::Paused | JobState::AwaitingApproval => {
            TaskStatus::Working
        }
        JobState::Cancelled => TaskStatus::Cancelled,
        JobState::Succeeded | JobState::Failed | JobState::DeadLetter => TaskStatus::Completed,
    };
    Task::new(
        job.id.to_string(),
        status,
        job.created_at.to_rfc3339(),
        job.updated_at.to_rfc3339(),
    )
    .with_status_message(summary)
    .with_poll_interval_ms(POLL_MS)
}

/// The final result: the tool result `queue.get` would answer, an error when the job failed.
fn result(view: &JobView) -> Result<JsonObject, ErrorData> {
    let value = serde_json::to_value(view)
        .map_err(|e| ErrorData::internal_error(format!("cannot write the result: {e}"), None))?;
    let mut result = if view.job.status == JobState::Succeeded {
        CallToolResult::structured(value)
    } else {
        CallToolResult::structured_error(value)
    };
    result
        .content
        .insert(0, ContentBlock::text(view.summary.clone()));
    match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        _ => Err(ErrorData::internal_error("cannot write the result", None)),
    }
}

fn id(task_id: &str) -> Result<JobId, ErrorData> {
    task_id
        .parse()
        .map_err(|_| ErrorData::invalid_params(format!("no task {task_id:?}"), None))
}

/// The spec's answer for a task that does not exist, or that the caller may not see
/// (which must not tell the two apart); other refusals keep the REST API's body.
fn unknown(task_id: &str) -> impl Fn(ErrorBody) -> ErrorData + '_ {
    move |error| {
        let code = error.error_code();
        if code.status() == 404 || code.status() == 403 {
            ErrorData::invalid_params(format!("no task {task_id:?}"), None)
        } else if code.is_internal() {
            ErrorData::internal_error(error.message, None)
        } else {
            let data = serde_json::to_value(&error).ok();
            ErrorData::invalid_params(error.message, data)
        }
    }
}
