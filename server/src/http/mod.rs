//! Everything `stepwise serve` answers over HTTP: the REST API (`api`), token auth (`auth`),
//! the probes of load balancers and orchestrators (`health`),
//! the dashboard's login (`session`) and the whole site on one router (`site`), with MCP's
//! routes (`crate::mcp`, which builds on these) beside it. The shared
//! pieces (`error`, `state`, `secret`) are leaves, so none of these import each other back.

pub mod api;
pub mod auth;
pub mod error;
pub mod health;
pub mod metrics;
pub mod secret;
pub mod session;
pub mod site;
pub mod state;

pub use error::ApiError;
pub use state::{AppState, GitHubHook, Limits};
