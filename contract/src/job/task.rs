//! What a worker reports while it runs a task (seeds 000 and 001): the three stages, the
//! step timeline and the artifact paths. The dashboard builds its timeline from these, so
//! both sides take them from here.

/// The stages, in the order they run. Steps are internal to the execute stage.
pub const STAGE_PREPARE: &str = "moonmind.task.prepare";
pub const STAGE_EXECUTE: &str = "moonmind.task.execute";
pub const STAGE_PUBLISH: &str = "moonmind.task.publish";
pub const STAGES: [&str; 3] = [STAGE_PREPARE, STAGE_EXECUTE, STAGE_PUBLISH];

/// A stage began or ended; the payload's `stage` names it, and a finish carries
/// `outcome`: `succeeded`, `failed`, `skipped` or `cancelled`.
pub const STAGE_STARTED: &str = "task.stage.started";
pub const STAGE_FINISHED: &str = "task.stage.finished";

/// The step timeline. `plan` carries `count` and `stepIds`; the others carry
/// `stepIndex` (0-based), `stepId`, `effectiveSkill`, `hasStepInstructions` and an
/// optional `summary` (a finished step's: the agent's final message). A finished step,
/// and a failed one when known, also carries `usage` ([`super::StepUsage`]).
pub const STEPS_PLAN: &str = "task.steps.plan";
pub const STEP_STARTED: &str = "task.step.started";
pub const STEP_FINISHED: &str = "task.step.finished";
pub const STEP_FAILED: &str = "task.step.failed";
/// A running step was stopped on request: `stopMs` says how long the stop took and
/// `killed` whether SIGKILL was needed after the grace period.
pub const STEP_CANCELLED: &str = "task.step.cancelled";
/// A line of a running step's output, for the live tail (`stepIndex`; the line is the
/// event's message).
pub const STEP_LOG: &str = "task.step.log";
/// Something the operator should know that did not stop the task (an effort the CLI
/// could not take, a step that committed on its own).
pub const WARNING: &str = "task.warning";
/// The completion loop (seed 003): an iteration began (`iteration`, `maxIterations`)
/// or ended (with `outcome`, its `check`'s result, `summary` and `usage`). Iteration 0
/// checks the steps' work; each later one runs the agent again, then the check.
pub const ITERATION_STARTED: &str = "task.iteration.started";
pub const ITERATION_FINISHED: &str = "task.iteration.finished";
/// A checkpoint was saved: the work so far as one patch against the base commit, after
/// a step (`afterStep`) or an iteration (`afterIteration`), with `baseCommit` and the
/// patch's `artifact`.
pub const CHECKPOINT: &str = "task.checkpoint";
/// A follow-up round (the job's second or later, after it had ended) began at its first
/// step (`round`, `fromStepIndex`, `steps`), or ended (`round`, `outcome`). The round's steps
/// say their `round` on every step event.
pub const ROUND_STARTED: &str = "task.round.started";
pub const ROUND_FINISHED: &str = "task.round.finished";
/// A step or iteration began a new agent session where it meant to continue the job's
/// (`reason`: `runtime_changed`, `lost`, `not_resumed`): its prompt tells the job's history.
pub const SESSION_RESTARTED: &str = "task.session.restarted";

/// A worker's message of no kind above: what the seed system's worker posts as free text
/// (its events name their kind in `message`; one that names none of these is kept as
/// this).
pub const MESSAGE: &str = "task.message";

/// Every task event kind above, for a client that listens to them by name (the event
/// stream names each event by its kind).
pub const ALL: [&str; 16] = [
    STAGE_STARTED,
    STAGE_FINISHED,
    STEPS_PLAN,
    STEP_STARTED,
    STEP_FINISHED,
    STEP_FAILED,
    STEP_CANCELLED,
    STEP_LOG,
    WARNING,
    ITERATION_STARTED,
    ITERATION_FINISHED,
    CHECKPOINT,
    ROUND_STARTED,
    ROUND_FINISHED,
    SESSION_RESTARTED,
    MESSAGE,
];

/// The kind of an event posted with none, as the seed system's worker posts them: its
/// `message` when that is a task event kind, else [`MESSAGE`].
pub fn kind_of_message(message: &str) -> &'static str {
    let message = message.trim();
    ALL.iter()
        .copied()
        .find(|kind| *kind == message)
        .unwrap_or(MESSAGE)
}

/// The kinds that move a task's progress (what a jobs list shows as `2/3`); a step's
/// log lines and warnings do not.
pub const PROGRESS: [&str; 8] = [
    STEPS_PLAN,
    STEP_STARTED,
    STEP_FINISHED,
    STEP_FAILED,
    STEP_CANCELLED,
    ITERATION_STARTED,
    ITERATION_FINISHED,
    CHECKPOINT,
];

pub fn is_progress(kind: &str) -> bool {
    PROGRESS.contains(&kind)
}

pub const TASK_CONTEXT: &str = "task_context.json";
pub const PUBLISH_RESULT: &str = "publish_result.json";
pub const CHANGES_PATCH: &str = "patches/changes.patch";

/// `logs/prepare.log`, `logs/execute.log`, `logs/publish.log` for the three stages.
pub fn stage_log(stage: &str) -> String {
    let short = stage.rsplit('.').next().unwrap_or(stage);
    format!("logs/{short}.log")
}

/// `logs/steps/step-0000.log` for the step at `index` (0-based, as `stepIndex`).
pub fn step_log(index: usize) -> String {
    format!("logs/steps/step-{index:04}.log")
}

/// `patches/steps/step-0000.patch` for the step at `index` (0-based).
pub fn step_patch(index: usize) -> String {
    format!("patches/steps/step-{index:04}.patch")
}

/// `logs/iterations/iteration-0001.log`: the agent's run in iteration `n`.
pub fn iteration_log(n: u32) -> String {
    format!("logs/iterations/iteration-{n:04}.log")
}

/// `logs/iterations/check-0001.log`: the completion check's output in iteration `n`.
pub fn check_log(n: u32) -> String {
    format!("logs/iterations/check-{n:04}.log")
}

/// `patches/iterations/iteration-0001.patch`: what the agent changed in iteration `n`.
pub fn iteration_patch(n: u32) -> String {
    format!("patches/iterations/iteration-{n:04}.patch")
}

/// `checkpoints/step-0000.patch`: all the work after the step at `index`, against the
/// base commit.
pub fn step_checkpoint(index: usize) -> String {
    format!("checkpoints/step-{index:04}.patch")
}

/// `checkpoints/iteration-0001.patch`: all the work after iteration `n`.
pub fn iteration_checkpoint(n: u32) -> String {
    format!("checkpoints/iteration-{n:04}.patch")
}
