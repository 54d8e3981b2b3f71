//! Validation and normalization of a job-create request into a [`NormalizedTask`].
//!
//! Every problem is reported, in document order, as a [`FieldError`] whose path is what
//! the submit form shows it next to. Nothing the client sent is silently dropped or
//! guessed at: unknown fields, wrong types and out-of-range values are all errors.
//!
//! The rules that need a reason:
//! - **Step-level overrides** (runtime, model, effort, repository, git, publish,
//!   container) are rejected (FR-004): a task runs in one workspace with one runtime and
//!   one publish decision, so a per-step value could not be honoured.
//! - **Blank steps are rejected** (seed 001 §9.2 and open question §14.1): a step with no
//!   instructions and no skill of its own other than `auto` would spend a whole agent
//!   invocation on "continue" with no new direction. The UI prevents such steps, and the
//!   backend agreeing means REST, CLI and MCP clients get the same answer as the browser.
//!   Whoever wants a continue step writes "continue" as its instructions. The implicit
//!   single step of a task without steps is not subject to this rule.
//! - **Steps with an enabled container** are rejected (FR-014): container execution runs
//!   one command and has no notion of steps yet.
//! - **Completion** (`task.completion`, seed 003) takes `criteria` in words and
//!   `maxIterations` (1 to 200, default 10). A check by command (`command`,
//!   `outputPattern`, `timeoutSeconds`) is refused by name until tasks run in loops:
//!   stored and never run, it would be a promise the worker does not keep.
//! - Missing step ids become `step-{index+1}`, so events and artifacts of a resubmitted
//!   task line up; duplicates (including a generated id colliding with an explicit one)
//!   are errors.

mod append;
mod budget;
mod container;
mod depends;
mod envelope;
mod payload;
mod rounds;
mod schedule;
mod settings;
mod skill;
mod step_list;
mod task;
mod walk;

use serde_json::Value;

use crate::defaults::Defaults;
use crate::error::FieldError;
use crate::model::NormalizedTask;
use crate::wire::JobRequest;

pub use append::append_steps;
pub use budget::budget;
pub use depends::{MAX_DEPENDS_ON, depends_on};
pub use schedule::{MAX_DAYS_AHEAD, not_before};

/// Validates `raw` (the request envelope) and fills in everything it leaves to `defaults`.
pub fn normalize(raw: &Value, defaults: &Defaults) -> Result<NormalizedTask, Vec<FieldError>> {
    let mut walker = walk::Walker::default();
    let task = envelope::envelope(&mut walker, raw, defaults);
    match task {
        Some(task) if walker.errors.is_empty() => Ok(task),
        _ => Err(walker.errors),
    }
}

/// [`normalize`] for a request built with the typed wire structs (as the UI does).
pub fn normalize_request(
    request: &JobRequest,
    defaults: &Defaults,
) -> Result<NormalizedTask, Vec<FieldError>> {
    let raw =
        serde_json::to_value(request).map_err(|e| vec![FieldError::new("", e.to_string())])?;
    normalize(&raw, defaults)
}
