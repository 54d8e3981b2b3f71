//! `/mcp`: the MCP server over streamable HTTP. Only a bearer token gets in (a user's or a
//! worker's; each tool applies the REST API's role rules): a dashboard cookie never does,
//! so a page elsewhere cannot drive it with the operator's session.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::WWW_AUTHENTICATE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::desk::Source;
use super::handler::{McpCaller, Stepwise};
use crate::http::AppState;
use crate::http::auth::bearer_token;
use crate::http::error::ApiError;

pub fn router(state: AppState) -> Router {
    let source = Source::Local(state.clone());
    let config = StreamableHttpServerConfig::default()
        // rmcp's Host allowlist guards servers that trust any local caller against DNS
        // rebinding. This one trusts only a bearer token, which a rebinding page does not
        // have, and it is reached under whatever name its operator gives it.
        .disable_allowed_hosts()
        .with_sse_keep_alive(Some(state.limits.keep_alive))
        .with_cancellation_token(state.closing.child_token());
    let service = StreamableHttpService::new(
        // A handler per session: its subscriptions are that session's.
        move || Ok(Stepwise::new(source.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(state, bearer_only))
}

async fn bearer_only(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    match bearer_token(request.headers(), &state.queue).await {
        Ok(Some(token)) => {
            request.extensions_mut().insert(McpCaller(token));
            next.run(request).await
        }
        Ok(None) => {
            let mut response = ApiError::unauthorized(
                "a valid token is required: send `Authorization: Bearer <token>` (a user token; a worker token for the worker tools)",
            )
            .into_response();
            response.headers_mut().insert(
                WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
            response
        }
        Err(error) => error.into_response(),
    }
}
