//! The worker's tools, as the seed system's queue offered them: claim a job, keep its
//! lease, finish it, upload an artifact. A worker token only; the rules are the worker
//! routes' (the token's scope narrows a claim; every write names the attempt it claimed).

use base64::Engine as _;
use contract::FieldError;
use contract::api::{ClaimBody, ErrorBody};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::desk::{internal, parse_id};
use super::handler::{Stepwise, answer, reply};
use super::queue_tools::show;
use super::summary::JobView;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimArgs {
    /// What this worker can run (`codex`, `claude`, `gemini`, `git`, `gh`, …), narrowed by
    /// the token's own list; a job needing anything else is left for another worker.
    #[serde(default)]
    pub capabilities: Option<Vec<String>>,
    /// Only jobs of these types (`task`); the token's list narrows it.
    #[serde(default)]
    pub allowed_types: Option<Vec<String>>,
    /// How long the lease lasts before the job goes back to the queue unless renewed with
    /// queue.heartbeat (the server's default when left out).
    #[serde(default)]
    pub lease_seconds: Option<u64>,
    /// How long to wait for a job when none is ready (0 when left out; the server caps it).
    #[serde(default)]
    pub wait_seconds: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatArgs {
    /// The job's id.
    pub job_id: String,
    /// The attempt the job was claimed with (the claimed job's `attempt`).
    pub attempt: u32,
    /// The lease's new length from now (the server's default when left out).
    #[serde(default)]
    pub lease_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteArgs {
    /// The job's id.
    pub job_id: String,
    /// The attempt the job was claimed with.
    pub attempt: u32,
    /// What was done, shown on the job.
    #[serde(default)]
    pub result_summary: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailArgs {
    /// The job's id.
    pub job_id: String,
    /// The attempt the job was claimed with.
    pub attempt: u32,
    /// What went wrong, shown on the job.
    pub error_message: String,
    /// Whether another attempt may succeed: the job is queued again while attempts remain.
    #[serde(default)]
    pub retryable: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UploadArgs {
    /// The job's id.
    pub job_id: String,
    /// The attempt the job was claimed with.
    pub attempt: u32,
    /// The artifact's relative path, such as `logs/steps/step-0000.log`; an upload of the
    /// same name replaces it.
    pub name: String,
    /// The content as text. Give this or `contentBase64`.
    #[serde(default)]
    pub content: Option<String>,
    /// The content as base64, for bytes that are not text.
    #[serde(default)]
    pub content_base64: Option<String>,
    /// Its media type (`text/plain` for `content`, `application/octet-stream` for
    /// `contentBase64`, when left out).
    #[serde(default)]
    pub content_type: Option<String>,
}

#[tool_router(router = worker_tools, vis = "pub(super)")]
impl Stepwise {
    /// Claim the next job this worker may run (worker token only). The job is leased to
    /// the worker: renew the lease with queue.heartbeat, then finish with queue.complete
    /// or queue.fail, each with the claimed `attempt`. Answers no job when none is ready.
    #[tool(name = "queue.claim", annotations(destructive_hint = false))]
    async fn claim(
        &self,
        Parameters(args): Parameters<ClaimArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let body = ClaimBody {
                    worker_id: None,
                    capabilities: args.capabilities,
                    allowed_types: args.allowed_types,
                    lease_seconds: args.lease_seconds,
                    wait_seconds: args.wait_seconds,
                    worker_version: None,
                    sandbox: None,
                    max_running_per_repository: None,
                };
                match desk.claim(body).await? {
                    Some(job) => {
                        let text = format!(
                            "claimed job {} (attempt {}), leased until {}",
                            job.id,
                            job.attempt,
                            job.lease_expires_at
                                .map_or_else(|| "-".to_string(), |at| at.to_rfc3339())
                        );
                        answer(text, &json!({ "job": job })).map_err(internal)
                    }
                    None => answer("no job is ready".to_string(), &json!({ "job": null }))
                        .map_err(internal),
                }
            }
            .await,
        )
    }

    /// Renew the lease on a claimed job (worker token only). The answer says whether a
    /// cancel was requested: if so, stop and report it with queue.fail.
    #[tool(name = "queue.heartbeat", annotations(idempotent_hint = true))]
    async fn heartbeat(
        &self,
        Parameters(args): Parameters<HeartbeatArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.job_id)?;
                let job = desk
                    .heartbeat(&id, args.attempt, args.lease_seconds)
                    .await?;
                show(JobView::new(job, None))
            }
            .await,
        )
    }

    /// Finish a claimed job as succeeded (worker token only).
    #[tool(name = "queue.complete", annotations(destructive_hint = false))]
    async fn complete(
        &self,
        Parameters(args): Parameters<CompleteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.job_id)?;
                let job = desk
                    .complete(&id, args.attempt, args.result_summary)
                    .await?;
                show(JobView::new(job, None))
            }
            .await,
        )
    }

    /// Finish a claimed job as failed (worker token only); a retryable failure queues it
    /// again while attempts remain.
    #[tool(name = "queue.fail", annotations(destructive_hint = false))]
    async fn fail(
        &self,
        Parameters(args): Parameters<FailArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.job_id)?;
                let job = desk
                    .fail(&id, args.attempt, args.error_message, args.retryable)
                    .await?;
                show(JobView::new(job, None))
            }
            .await,
        )
    }

    /// Store an artifact of a claimed job (worker token only): a log, a patch, a report.
    #[tool(name = "queue.upload_artifact", annotations(destructive_hint = false))]
    async fn upload_artifact(
        &self,
        Parameters(args): Parameters<UploadArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        reply(
            async {
                let id = parse_id(&args.job_id)?;
                let (bytes, default_type) = match (args.content, args.content_base64) {
                    (Some(text), None) => (text.into_bytes(), "text/plain"),
                    (None, Some(encoded)) => (
                        base64::engine::general_purpose::STANDARD
                            .decode(encoded.trim())
                            .map_err(|e| {
                                ErrorBody::invalid(vec![FieldError::new(
                                    "contentBase64",
                                    format!("not base64: {e}"),
                                )])
                            })?,
                        "application/octet-stream",
                    ),
                    _ => {
                        return Err(ErrorBody::invalid(vec![FieldError::new(
                            "content",
                            "give exactly one of content and contentBase64",
                        )]));
                    }
                };
                let content_type = args.content_type.as_deref().unwrap_or(default_type);
                let artifact = desk
                    .upload(&id, args.attempt, args.name.trim(), content_type, bytes)
                    .await?;
                let text = format!("stored {} ({} bytes)", artifact.name, artifact.size);
                answer(text, &json!({ "artifact": artifact })).map_err(internal)
            }
            .await,
        )
    }
}
