//! The worker: claims jobs from the server over HTTP, prepares a workspace, runs each step
//! as one agent CLI invocation and publishes once. It never touches the database.
//! Today it only knows which tools this machine offers; the run loop comes next.

mod probe;

pub use probe::{PROBED_TOOLS, probe_capabilities};
