//! The server room: the `stepwise` binary's commands (`cli`) and everything it answers
//! over HTTP (`http`: the REST API, token auth, the dashboard's login, the page wiring),
//! and the MCP server both of them serve (`mcp`).
//! It holds no logic of its own: handlers and commands call the queue, pages and worker.

// Leptos view types nest deeply; computing their layout needs more than the default 128.
#![recursion_limit = "256"]

#[cfg(feature = "bench")]
pub mod bench;
pub mod cli;
pub mod feedback;
pub mod github;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod webhooks;
// Fixtures for this crate's tests in `tests/`: public only with the `testing` feature,
// which the crate's own dev-dependency on itself turns on.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
