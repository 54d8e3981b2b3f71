//! The worker: claims jobs from the server over HTTP, prepares a workspace, runs each step
//! as one agent CLI invocation and publishes once. It never touches the database.
//! Today it knows which tools this machine offers, how to talk to the server
//! ([`client::QueueClient`]), how to invoke each agent CLI ([`runtime`]) and how to run
//! and stop one as a process group ([`process`]); the claim loop and the stages come next.

pub mod auth_refs;
pub mod client;
pub mod git;
pub mod logins;
mod probe;
pub mod process;
pub mod publish;
pub mod redact;
pub mod runner;
pub mod runtime;
pub mod stages;
#[cfg(feature = "testing")]
pub mod testing;
pub mod workspace;

pub use probe::{PROBED_TOOLS, probe_capabilities};
