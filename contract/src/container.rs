//! A container task (`task.container`), the seed system's way: the task's `command` runs
//! in its `image` with the checkout mounted at `workdir`, instead of an agent's steps;
//! what it writes under `$ARTIFACT_DIR` becomes the job's artifacts under
//! `artifactsSubdir`, and the checkout is published as any task's.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::wire_names;

/// Where the checkout is mounted when `workdir` is not given.
pub const DEFAULT_WORKDIR: &str = "/workspace";
/// The artifacts' folder when `artifactsSubdir` is not given.
pub const DEFAULT_ARTIFACTS_SUBDIR: &str = "container";
/// How long the command may run when `timeoutSeconds` is not given.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 3600;
/// Where `$ARTIFACT_DIR` is inside the container.
pub const ARTIFACT_DIR: &str = "/stepwise/artifacts";
/// The variables the worker sets itself, which `env` may not name (in any case).
pub const RESERVED_ENV: [&str; 3] = ["ARTIFACT_DIR", "JOB_ID", "REPOSITORY"];

/// A container task as a client sends it (`task.container` of a job request): the server's
/// normalization checks it and answers with a [`ContainerSpec`]. The runner's settings
/// (`workdir`, `env`, `artifactsSubdir`, `timeoutSeconds`, `pull`, `resources`,
/// `cacheVolumes`) travel as given, beside `enabled`, `image` and `command`: the browser's
/// task form never sets them, and its bundle stays lean.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerInput {
    pub enabled: bool,
    pub image: Option<String>,
    /// The argv to run in the image; `None` uses the image's own command.
    pub command: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Container execution settings.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerSpec {
    pub enabled: bool,
    pub image: Option<String>,
    /// The argv to run in the image; `None` uses the image's own command.
    pub command: Option<Vec<String>>,
    /// Where the checkout is mounted and the command runs, an absolute path [default:
    /// `/workspace`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// Variables for the command, besides `ARTIFACT_DIR`, `JOB_ID` and `REPOSITORY`,
    /// which the worker sets.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The artifacts' folder: what the command writes under `$ARTIFACT_DIR` becomes the
    /// job's artifacts `<artifactsSubdir>/…` [default: `container`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts_subdir: Option<String>,
    /// The longest the command may run [default: 3600].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// When the image is pulled [default: `if-missing`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull: Option<PullPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ContainerResources>,
    /// Named volumes that outlive the job (package caches), mounted at their targets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache_volumes: Vec<CacheVolume>,
    /// Other settings of the seed system's runner, carried through untouched.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ContainerSpec {
    pub fn workdir(&self) -> &str {
        self.workdir.as_deref().unwrap_or(DEFAULT_WORKDIR)
    }

    pub fn artifacts_subdir(&self) -> &str {
        self.artifacts_subdir
            .as_deref()
            .unwrap_or(DEFAULT_ARTIFACTS_SUBDIR)
    }

    pub fn timeout_seconds(&self) -> u64 {
        self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS)
    }

    pub fn pull(&self) -> PullPolicy {
        self.pull.unwrap_or_default()
    }
}

/// When the worker pulls the image.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullPolicy {
    /// Only when the engine does not have it.
    #[default]
    IfMissing,
    /// Before every run.
    Always,
}

wire_names!(PullPolicy, "pull policy", exact { IfMissing = "if-missing", Always = "always" });

/// Limits for the container, as the engine takes them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerResources {
    /// CPUs, as a decimal number (`1.5`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Memory, as bytes or with a unit (`512m`, `2g`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

/// A named volume mounted at `target`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheVolume {
    pub name: String,
    pub target: String,
}

/// `<artifactsSubdir>/metadata/run.json`: how a container task's run went, in the seed
/// system's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRun {
    pub job_id: String,
    pub repository: String,
    pub container_name: String,
    pub image: String,
    pub command: Option<Vec<String>>,
    pub pull_mode: PullPolicy,
    pub workdir: String,
    pub artifact_dir: String,
    pub timeout_seconds: u64,
    pub timed_out: bool,
    pub exit_code: Option<i32>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub duration_seconds: f64,
    pub error: Option<String>,
}
