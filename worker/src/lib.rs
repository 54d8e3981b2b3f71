//! The worker: claims jobs from the server over HTTP, prepares a workspace, runs each step
//! as one agent CLI invocation and publishes once. It never touches the database.
//! Today it knows which tools this machine offers and how to talk to the server
//! ([`client::QueueClient`]); the run loop comes next.

pub mod client;
mod probe;

pub use probe::{PROBED_TOOLS, probe_capabilities};
