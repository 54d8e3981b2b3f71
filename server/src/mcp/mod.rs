//! MCP: stepwise as a Model Context Protocol server, so other agents hand it work, watch it
//! and cancel it. One handler serves both transports: streamable HTTP at `/mcp` inside the
//! server (`http.rs`: the site's router serves it), calling the queue service as the REST
//! API does (and its worker routes' own rules, from `crate::http`), and
//! stdio (`stepwise mcp`), calling a server's REST API as the CLI does. Jobs are tools'
//! subjects (`queue_tools`; a worker's in `worker_tools`) and resources in seed 003's task shape (`resources`).

mod desk;
mod handler;
mod http;
mod queue_tools;
mod request;
mod resources;
mod summary;
mod task_tools;
mod tasks;
mod watch;
mod worker_tools;

pub use desk::Source;
pub use handler::{McpCaller, Stepwise};
pub use http::router;
