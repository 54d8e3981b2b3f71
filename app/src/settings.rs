use contract::{Defaults, RuntimeMode};
use serde::{Deserialize, Serialize};

/// What the server tells the pages about its configuration. The server builds it once at
/// start-up and provides it as context to every render and server function; `skills` is
/// filled in per request from the [`SkillCatalog`], so a skill installed while the server
/// runs shows up on the next page load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerSettings {
    pub defaults: Defaults,
    pub runtimes: Vec<RuntimeStatus>,
    pub skills: Vec<SkillInfo>,
}

/// One agent runtime and whether this server's own machine can run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStatus {
    pub mode: RuntimeMode,
    pub installed: bool,
}

/// A skill the server knows (installed in its skills directory), as the task form offers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkillInfo {
    pub id: String,
    pub description: Option<String>,
    /// From the skill's manifest; sent with the selection so the server derives them.
    pub required_capabilities: Vec<String>,
}

/// Lists the installed skills when a page asks. The server provides it as context; the
/// pages never read the disk themselves.
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct SkillCatalog(pub std::sync::Arc<dyn Fn() -> Vec<SkillInfo> + Send + Sync>);
