use contract::{Defaults, RuntimeMode};
use serde::{Deserialize, Serialize};

/// What the server tells the pages about its configuration. The server builds it once at
/// start-up and provides it as context to every render and server function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerSettings {
    pub defaults: Defaults,
    pub runtimes: Vec<RuntimeStatus>,
}

/// One agent runtime and whether this server's own machine can run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStatus {
    pub mode: RuntimeMode,
    pub installed: bool,
}
