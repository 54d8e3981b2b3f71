//! The task contract: what a stepwise task is on the wire, how it is normalized and
//! validated, which capabilities it needs, and how its steps become prompts.
//! Pure Rust + serde so the browser (wasm) and the server check a task the same way.
//!
//! # Flow
//!
//! A client builds a [`JobRequest`] (or raw JSON) and the server calls [`normalize()`]
//! with the [`Defaults`] it read once at startup from its flags and their variables.
//! The result, a [`NormalizedTask`], is what the queue stores: fully resolved, with its
//! [`derive_capabilities`] list filled in, and stable under re-normalization. The
//! worker asks it for [`NormalizedTask::skills`] to prepare, then for each of
//! [`NormalizedTask::resolved_steps`] runs one agent invocation with [`prompt()`].
//! It reports each step through the typed payloads of [`events`]; whoever reads the job
//! back folds those events into a [`Timeline`] (each step's and stage's state) with the
//! same code, in the browser as on the server.
//!
//! # Decisions
//!
//! - **Blank steps are rejected.** A step with no instructions and no skill of its own
//!   other than `auto` would spend a whole agent invocation on "continue" with no new
//!   direction. The UI prevents such steps (seed 001 §9.2) and the backend agrees, so
//!   REST, CLI and MCP clients get the same answer as the browser. A user who wants a
//!   continue step writes "continue" as its instructions. A task without steps (the
//!   implicit single step) is not affected.
//! - **Nothing is dropped silently**: unknown fields, unparseable checklist lines and
//!   invalid task defaults (refused when the server starts) are all errors. See
//!   [`normalize`](mod@normalize) for the rest.

pub mod api;
pub mod budget;
pub mod capabilities;
pub mod checklist;
pub mod checkpoint;
pub mod container;
pub mod defaults;
pub mod error;
pub mod events;
pub mod feedback;
pub mod job;
pub mod job_id;
pub mod limits;
pub mod model;
pub mod modes;
mod names;
pub mod normalize;
pub mod prompt;
pub mod rules;
pub mod session;
pub mod source;
pub mod states;
pub mod steps;
pub mod text;
pub mod timeline;
pub mod usage;
pub mod wire;

pub use budget::{BudgetLimit, JobBudget, Overrun};
pub use capabilities::derive_capabilities;
pub use checklist::{ChecklistItem, ChecklistLabel, parse_checklist, render_checklist};
pub use defaults::{Defaults, RuntimeDefaults};
pub use error::FieldError;
pub use job::{Approval, Artifact, EventLevel, Job, JobEvent, JobState, NewEvent, StepUsage};
pub use job_id::{JobId, ParseJobIdError};
pub use model::{
    Completion, NormalizedTask, Notify, Payload, PublishSettings, Round, RuntimeSettings, Step,
    TaskSpec,
};
pub use modes::{ParseModeError, PublishMode, RuntimeMode};
pub use normalize::{append_steps, depends_on, normalize, normalize_request, not_before};
pub use prompt::{iteration_prompt, prompt};
pub use steps::{ResolvedStep, generated_step_id};
pub use timeline::{StageState, StepProgress, StepState, Timeline};
pub use wire::{
    AUTO_SKILL, AuthRefs, CompletionInput, ContainerInput, ContainerSpec, GitSettings, JobRequest,
    JobType, PayloadInput, PublishInput, RuntimeInput, SkillSelection, StepInput, TaskInput,
};
