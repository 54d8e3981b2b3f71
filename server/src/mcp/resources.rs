//! Jobs as MCP resources, in seed 003's task shape: `stepwise://tasks/{id}` for one task,
//! `stepwise://tasks?status=…` for the tasks in one state, and
//! `stepwise://tasks/{id}/artifacts/{name}` for an artifact (a step's log or patch).

use contract::JobState;
use contract::api::ErrorBody;
use contract::api::resources::{TASKS_URI, TaskResource};
use contract::job::Job;
use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use super::desk::Desk;
use super::desk::parse_id;
use super::summary::{Progress, line};

/// How much of an artifact a read returns.
const MAX_ARTIFACT_BYTES: u64 = 1 << 20;
/// How many tasks one list (a page, or a filtered read) holds.
const PAGE: u32 = 50;
const JSON: &str = "application/json";

/// A page of tasks, newest first.
pub async fn list(desk: &Desk, cursor: Option<String>) -> Result<ListResourcesResult, ErrorData> {
    let (jobs, next) = desk
        .jobs(None, Some(PAGE), cursor)
        .await
        .map_err(protocol)?;
    let resources = jobs
        .iter()
        .map(|job| {
            let task = TaskResource::new(job, &[], &[], String::new());
            Resource::new(task.uri, task.name)
                .with_description(line(job, None))
                .with_mime_type(JSON)
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = next;
    Ok(result)
}

pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{TASKS_URI}/{{id}}"), "task")
            .with_description("One task: its state, progress and metadata, in seed 003's shape.")
            .with_mime_type(JSON),
        ResourceTemplate::new(format!("{TASKS_URI}{{?status}}"), "tasks")
            .with_description(
                "The newest tasks (up to 50), only those in one state when `status` is given: pending, running, completed, failed or cancelled.",
            )
            .with_mime_type(JSON),
        ResourceTemplate::new(format!("{TASKS_URI}/{{id}}/artifacts/{{+name}}"), "artifact")
            .with_description(
                "An artifact of a task, as text: a step's log (logs/steps/step-0000.log), its patch (patches/steps/step-0000.patch), the whole patch (patches/changes.patch).",
            ),
    ])
}

pub async fn read(desk: &Desk, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let rest = uri.strip_prefix(TASKS_URI).ok_or_else(|| unknown(uri))?;
    let contents = if rest.is_empty() || rest.starts_with('?') {
        let status = status_filter(rest.trim_start_matches('?'))?;
        let (jobs, _) = desk
            .jobs(status, Some(PAGE), None)
            .await
            .map_err(protocol)?;
        let mut tasks = Vec::with_capacity(jobs.len());
        for job in &jobs {
            tasks.push(task(desk, job, false).await?);
        }
        ResourceContents::text(to_json(&tasks)?, uri).with_mime_type(JSON)
    } else {
        let rest = rest.strip_prefix('/').ok_or_else(|| unknown(uri))?;
        match rest.split_once("/artifacts/") {
            None => {
                let id = parse_id(rest).map_err(protocol)?;
                let job = desk.job(&id).await.map_err(protocol)?;
                ResourceContents::text(to_json(&task(desk, &job, true).await?)?, uri)
                    .with_mime_type(JSON)
            }
            Some((id, name)) => {
                let id = parse_id(id).map_err(protocol)?;
                let read = desk
                    .artifact(&id, name, MAX_ARTIFACT_BYTES)
                    .await
                    .map_err(protocol)?;
                let mut text = String::from_utf8_lossy(&read.bytes).into_owned();
                if read.truncated {
                    text.push_str(&format!(
                        "\n[cut: the first {MAX_ARTIFACT_BYTES} of {} bytes]",
                        read.artifact.size
                    ));
                }
                ResourceContents::text(text, uri).with_mime_type(read.artifact.content_type)
            }
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// One task as seed 003 shapes it; `artifacts` lists its artifacts too.
pub(super) async fn task_resource(
    desk: &Desk,
    job: &Job,
    artifacts: bool,
) -> Result<TaskResource, ErrorBody> {
    let events = desk.progress_events(&job.id).await?;
    let listed = if artifacts {
        desk.artifacts(&job.id).await?
    } else {
        Vec::new()
    };
    let progress = Progress::of(job, &events);
    Ok(TaskResource::new(
        job,
        &events,
        &listed,
        line(job, progress.as_ref()),
    ))
}

async fn task(desk: &Desk, job: &Job, artifacts: bool) -> Result<TaskResource, ErrorData> {
    task_resource(desk, job, artifacts).await.map_err(protocol)
}

/// Seed 003's task state, read as the job state it lists (`failed` lists the jobs that
/// failed outright; those whose attempts ran out are `dead_letter` jobs).
pub(super) fn task_status(text: &str) -> Result<Option<JobState>, String> {
    match text.trim() {
        "" => Ok(None),
        "pending" => Ok(Some(JobState::Queued)),
        "running" => Ok(Some(JobState::Running)),
        "completed" => Ok(Some(JobState::Succeeded)),
        "failed" => Ok(Some(JobState::Failed)),
        "cancelled" => Ok(Some(JobState::Cancelled)),
        other => Err(format!(
            "unknown status {other:?}; use pending, running, completed, failed or cancelled"
        )),
    }
}

/// `status=running`.
fn status_filter(query: &str) -> Result<Option<JobState>, ErrorData> {
    let mut status = None;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key != "status" {
            return Err(ErrorData::invalid_params(
                format!("unknown parameter {key:?}; the list takes only status"),
                None,
            ));
        }
        status = task_status(&value).map_err(|e| ErrorData::invalid_params(e, None))?;
    }
    Ok(status)
}

fn to_json(value: &impl serde::Serialize) -> Result<String, ErrorData> {
    serde_json::to_string_pretty(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot write the resource: {e}"), None))
}

fn unknown(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!(
            "no resource at {uri}; stepwise serves {TASKS_URI}/{{id}} and what resources/templates/list names"
        ),
        None,
    )
}

/// A refusal as a protocol error: a missing job or artifact is the spec's "resource not
/// found"; anything else carries the REST API's body as its data.
fn protocol(error: ErrorBody) -> ErrorData {
    let code = error.error_code();
    let data = serde_json::to_value(&error).ok();
    if code.status() == 404 {
        ErrorData::resource_not_found(error.message, data)
    } else if code.is_internal() {
        ErrorData::internal_error(error.message, None)
    } else {
        ErrorData::invalid_params(error.message, data)
    }
}
