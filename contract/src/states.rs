//! The states a task's step and stage can be in, as the timeline folds them from events
//! and a stage's end reports its outcome.

use serde::{Deserialize, Serialize};

use crate::modes::ParseModeError;
use crate::wire_names;

/// Where a step of a task is, as its latest event says. Read back from its name through
/// [`FromStr`], which keeps the browser bundle smaller than a derived enum visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum StepState {
    /// No event named it yet.
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// Never folded from events: how a page shows a step that never ran in a job that has
    /// ended (failed or cancelled before it).
    Skipped,
}

wire_names!(StepState, "step state", exact {
    Pending = "pending",
    Running = "running",
    Succeeded = "succeeded",
    Failed = "failed",
    Cancelled = "cancelled",
    Skipped = "skipped",
});

/// Where one of the three stages (prepare, execute, publish) is; read back as
/// [`StepState`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum StageState {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Publishing with nothing to publish, or with publish mode `none`.
    Skipped,
    Cancelled,
}

wire_names!(StageState, "stage state", exact {
    Pending = "pending",
    Running = "running",
    Succeeded = "succeeded",
    Failed = "failed",
    Skipped = "skipped",
    Cancelled = "cancelled",
});

impl StageState {
    /// Whether a finished stage can end in this state: the running and pending states are
    /// no outcome.
    pub fn is_outcome(self) -> bool {
        !matches!(self, StageState::Pending | StageState::Running)
    }
}

/// Serde reads a state through its name (`try_from = "String"`), which keeps the browser
/// bundle smaller than a derived visitor.
macro_rules! from_name {
    ($state:ident) => {
        impl TryFrom<String> for $state {
            type Error = ParseModeError;

            fn try_from(name: String) -> Result<Self, Self::Error> {
                name.parse()
            }
        }
    };
}

from_name!(StepState);
from_name!(StageState);
