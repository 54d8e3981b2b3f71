//! The errors of every command, in one leaf module that the commands import and that
//! imports none of them back (only the jobs client's error, which it wraps).

use std::path::PathBuf;

use super::jobs::JobsCliError;
use crate::http::error::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Database(#[from] queue::DatabaseError),
    #[error(
        "cannot listen on {addr}: {source}. Is another server using that port? Pick another with --port."
    )]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("the server stopped: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    Queue(#[from] queue::QueueError),
    #[error("cannot create the first admin token: {}", .0.code())]
    Bootstrap(ApiError),
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Jobs(#[from] JobsCliError),
    #[error("the MCP server stopped: {0}")]
    Mcp(String),
    #[cfg(feature = "bench")]
    #[error("the benchmark stopped: {0}")]
    Bench(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid --host/--port {addr:?}: {reason}")]
    Addr { addr: String, reason: String },
    #[error(
        "{from}={value:?} and {alias_from}={alias_value:?} disagree; set only one of them, \
         or both to the same value"
    )]
    PublishModeConflict {
        from: String,
        value: String,
        alias_from: String,
        alias_value: String,
    },
    #[error(
        "the built site is missing at {0}: build it with `cargo leptos build --release`, \
         or point --site-root (LEPTOS_SITE_ROOT) at it"
    )]
    SiteMissing(PathBuf),
    /// A flag with a value it cannot take, and why.
    #[error("{flag} {value:?}: {reason}")]
    Flag {
        flag: &'static str,
        value: String,
        reason: String,
    },
}
