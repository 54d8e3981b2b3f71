//! `stepwise mcp`: the MCP server over stdio, for clients that start it as a process
//! (Claude Code, Codex, an IDE). It reaches a stepwise server over REST with a token, as
//! the CLI does, so it runs on any machine that can reach one. stdout is the protocol:
//! nothing else is written there (logs go to stderr).

use clap::Args;
use queue::TokenKind;
use rmcp::ServiceExt;
use worker::client::QueueClient;

use super::error::CliError;
use super::jobs::ClientArgs;
use crate::mcp::{Source, Stepwise};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

pub async fn run(args: McpArgs) -> Result<(), CliError> {
    let client = QueueClient::new(&args.client.server, &args.client.token)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let kind = check_token(&client).await?;
    let service = Stepwise::new(Source::Remote(client))
        .with_token_kind(kind)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| CliError::Mcp(e.to_string()))?;
    // Ends when the client closes stdin (or cancels).
    service
        .waiting()
        .await
        .map_err(|e| CliError::Mcp(e.to_string()))?;
    Ok(())
}

/// A token the server does not know is a mistake to report now, where the client shows
/// the process's error, rather than on every call. A server that cannot be reached yet
/// may come up later: that is only a warning. The kind of token, when the server told,
/// decides which tools are listed.
async fn check_token(client: &QueueClient) -> Result<Option<TokenKind>, CliError> {
    match client.list_jobs(None, None, Some(1), None).await {
        Ok(_) => Ok(Some(TokenKind::User)),
        Err(e) if e.status().is_some_and(|s| s.as_u16() == 401) => Err(CliError::Usage(format!(
            "{e}; pass a token of this server with --token or STEPWISE_TOKEN (`stepwise token create` makes one)"
        ))),
        // A worker token reads no jobs, but its worker tools work.
        Err(e) if e.status().is_some_and(|s| s.as_u16() == 403) => Ok(Some(TokenKind::Worker)),
        Err(e) if e.status().is_some() => Ok(None),
        Err(e) => {
            tracing::warn!("{e} Serving MCP anyway: each call tries the server again.");
            Ok(None)
        }
    }
}
