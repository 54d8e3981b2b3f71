//! The MCP server itself: what it tells a client at `initialize`, how a call finds its
//! caller, and how answers and refusals are shaped for a model to read.

use contract::api::ErrorBody;
use queue::{TokenKind, TokenRecord};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, CancelTaskParams, ContentBlock, GetTaskParams, GetTaskResult, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use serde::Serialize;

use super::desk::{Desk, Source};
use super::watch::{Subscriptions, task_of};

/// The caller of an HTTP request to `/mcp`, put there by the bearer check in front of it.
#[derive(Clone, Debug)]
pub struct McpCaller(pub TokenRecord);

const INSTRUCTIONS: &str = "stepwise runs coding-agent tasks on git repositories: a task is an objective and an ordered list of steps, each run as one agent invocation in one workspace, then published (nothing, a branch or a pull request). Submit with queue.enqueue, putting every action the user asked for in its own step; follow with queue.get (a summary line and each step's state) or queue.events; stop with queue.cancel. Job ids are UUIDs. Every job is also a resource, stepwise://tasks/{id}.";

/// stepwise as an MCP server, over the queue itself or over a server's REST API. One per
/// MCP session (its clones share the session's subscriptions).
#[derive(Clone)]
pub struct Stepwise {
    source: Source,
    tools: ToolRouter<Stepwise>,
    subscriptions: Subscriptions,
    /// The kind of the token a remote source calls with, when known.
    remote_kind: Option<TokenKind>,
}

impl Stepwise {
    pub fn new(source: Source) -> Stepwise {
        Stepwise {
            source,
            tools: Self::queue_tools()
                + Self::task_tools()
                + Self::course_tools()
                + Self::worker_tools(),
            subscriptions: Subscriptions::default(),
            remote_kind: None,
        }
    }

    /// Over a remote source, lists only the tools a token of `kind` may call.
    pub fn with_token_kind(mut self, kind: Option<TokenKind>) -> Stepwise {
        self.remote_kind = kind;
        self
    }

    /// The kind of token this call is made with, when known.
    fn caller_kind(&self, ctx: &RequestContext<RoleServer>) -> Option<TokenKind> {
        match &self.source {
            Source::Remote(_) => self.remote_kind,
            Source::Local(_) => ctx
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<McpCaller>())
                .map(|caller| caller.0.kind),
        }
    }

    /// The way to the queue for this call, as its caller.
    pub(super) fn desk(&self, ctx: &RequestContext<RoleServer>) -> Result<Desk, ErrorData> {
        match &self.source {
            Source::Remote(client) => Ok(Desk::Remote(client.clone())),
            Source::Local(state) => {
                // The HTTP request's parts travel with the message; the bearer check put
                // the caller in them. A call without one never passed that check.
                let parts = ctx.extensions.get::<axum::http::request::Parts>();
                let caller = parts
                    .and_then(|parts| parts.extensions.get::<McpCaller>())
                    .ok_or_else(|| {
                        tracing::error!("an MCP call reached a tool without a caller");
                        ErrorData::internal_error("the call has no authenticated caller", None)
                    })?;
                Ok(Desk::Local {
                    state: state.clone(),
                    token: caller.0.clone(),
                    base: parts.and_then(base_url),
                })
            }
        }
    }
}

#[tool_handler(router = self.tools)]
impl ServerHandler for Stepwise {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("stepwise", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// Only the tools the caller's kind of token may call: a model shown a worker's
    /// tools with a user's token would only be refused. Unknown callers see all.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tools.list_all();
        if let Some(kind) = self.caller_kind(&ctx) {
            let worker = Self::worker_tools();
            tools.retain(|tool| worker.has_route(&tool.name) == (kind == TokenKind::Worker));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let desk = self.desk(&ctx)?;
        super::resources::list(&desk, request.and_then(|r| r.cursor)).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        // The same check as every other call, though the templates are no secret.
        self.desk(&ctx)?;
        Ok(super::resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let desk = self.desk(&ctx)?;
        Ok(super::resources::read(&desk, &request.uri).await?.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let desk = self.desk(&ctx)?;
        let id = task_of(&request.uri)?;
        // The caller must be able to read it, and it must exist.
        super::resources::read(&desk, &request.uri).await?;
        self.subscriptions
            .start(desk, id, request.uri, ctx.peer.clone());
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        super::tasks::get(&self.desk(&ctx)?, &request.task_id).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        super::tasks::cancel(&self.desk(&ctx)?, &request.task_id).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        super::tasks::update(&self.desk(&ctx)?, &request.task_id).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(super::watch::accepted(requested))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let desk = self.desk(subscription.request_context())?;
        super::watch::listen(desk, subscription).await;
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.desk(&ctx)?;
        self.subscriptions.stop(&request.uri);
        Ok(())
    }
}

/// The address the client reached: its `Host`, with the scheme a proxy in front says it
/// used (`X-Forwarded-Proto`), else `http`. Only ever shown back to that client.
fn base_url(parts: &axum::http::request::Parts) -> Option<String> {
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let host = header("host")?;
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
    };
    if !plain(host) {
        return None;
    }
    let scheme = match header("x-forwarded-proto") {
        Some("https") => "https",
        _ => "http",
    };
    Some(format!("{scheme}://{host}"))
}

/// A tool's answer: `summary` as text first (some clients read only text), the value as
/// `structuredContent` and, as the spec asks, as JSON text too.
pub fn answer(summary: String, value: &impl Serialize) -> Result<CallToolResult, ErrorData> {
    let value = serde_json::to_value(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot write the answer: {e}"), None))?;
    let mut result = CallToolResult::structured(value);
    result.content.insert(0, ContentBlock::text(summary));
    Ok(result)
}

/// A refusal as a tool error the model can read and act on: the REST API's code and
/// message as text, and its whole body (every invalid field) as `structuredContent`.
pub fn refused(error: ErrorBody) -> Result<CallToolResult, ErrorData> {
    let mut text = format!("refused ({}): {}", error.code, error.message);
    for field in &error.errors {
        text.push_str(&format!("\n- {}: {}", field.path, field.message));
    }
    let value = serde_json::json!({ "error": error });
    let mut result = CallToolResult::structured_error(value);
    result.content.insert(0, ContentBlock::text(text));
    Ok(result)
}

/// Runs a tool's body and turns its refusal into a tool error.
pub fn reply(outcome: Result<CallToolResult, ErrorBody>) -> Result<CallToolResult, ErrorData> {
    outcome.or_else(refused)
}
