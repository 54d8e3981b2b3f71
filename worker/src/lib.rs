//! The worker: claims jobs from the server over HTTP ([`client::QueueClient`],
//! [`runner`]), prepares a workspace, runs each step as one agent CLI invocation
//! ([`runtime`], [`stages`]) under one process policy ([`process`]), each step and check
//! in a box of its own ([`sandbox`]), and publishes once ([`publish`]). It never touches
//! the database; everything it sends is redacted first.

pub mod auth_refs;
pub mod client;
pub mod container;
pub mod git;
pub mod logins;
mod probe;
pub mod process;
pub mod publish;
pub mod redact;
pub mod runner;
pub mod runtime;
pub mod sandbox;
pub mod stages;
#[cfg(feature = "testing")]
pub mod testing;
pub mod workspace;

pub use probe::{PROBED_TOOLS, probe_capabilities};
