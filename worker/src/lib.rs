//! The worker: claims jobs from the server over HTTP, prepares a workspace, runs each step
//! as one agent CLI invocation and publishes once. It never touches the database.
//! Today it knows which tools this machine offers, how to talk to the server
//! ([`client::QueueClient`]) and how to invoke each agent CLI ([`runtime`]); the run loop
//! comes next.

pub mod client;
mod probe;
pub mod runtime;

pub use probe::{PROBED_TOOLS, probe_capabilities};
