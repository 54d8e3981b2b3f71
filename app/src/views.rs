//! What the job pages are rendered from: shaped on the server (`format.rs`), handed to the
//! islands as their props, so the server's render and the browser's hydration read the
//! same text. A leaf: it imports no page, so the pages and `format.rs` may both use it.

use contract::{JobState, StageState, StepState};
use serde::{Deserialize, Serialize};

/// The job's fact whose value counts on while the job runs (see `since`).
pub const DURATION_FACT: &str = "Duration";

/// One line of the jobs table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub id: String,
    pub status: JobState,
    /// The objective's first line.
    pub title: String,
    pub repository: String,
    pub runtime: String,
    pub steps: usize,
    /// Steps finished in the current attempt.
    pub steps_done: u32,
    pub created: String,
    /// From start to finish (or to now, while running); empty before it starts.
    pub duration: String,
    /// While it runs: when it started (ms since the epoch), for the page to count on.
    pub since: Option<i64>,
    /// Tokens and cost its steps reported, in brief (`1.2k in · 51 out · $0.75`); empty
    /// when none did.
    pub usage: String,
    /// Why a queued job waits with no worker able to run it.
    pub waiting: Option<String>,
    /// Its pull request has feedback no round of its own will take: a person should look.
    #[serde(default)]
    pub needs_attention: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobList {
    pub jobs: Vec<JobRow>,
    pub next_cursor: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: String,
    pub status: JobState,
    pub title: String,
    pub objective: String,
    pub facts: Vec<(String, String)>,
    /// While it runs: when it started (ms since the epoch), for the Duration fact to count on.
    pub since: Option<i64>,
    pub steps: Vec<StepView>,
    /// What every step used in all, over every attempt (empty when no step reported).
    pub usage: String,
    /// Its budget, when it has one or could take one.
    pub budget: Option<BudgetView>,
    /// prepare, execute and publish, each with its state.
    pub stages: Vec<(String, StageState)>,
    /// Why a queued job waits with no worker able to run it.
    pub waiting: Option<String>,
    pub cancel: Option<CancelView>,
    pub artifacts: Vec<ArtifactView>,
    /// The output of the running step, else of the last step that ran.
    pub tail: Option<LogTail>,
    /// The newest events (at most 200), oldest first; the API has them all.
    pub events: Vec<EventView>,
    /// How many events the job has in all.
    pub events_total: u64,
    /// The newest event's id: the live stream resumes after it.
    pub last_event_id: i64,
    /// Whether the logged-in user may cancel (a viewer may not: no form is offered).
    pub may_cancel: bool,
    /// The completion loop's iterations, for a task with a check (its command, criteria
    /// and checkpoints are facts). An iteration reads as a step does, one row shape and
    /// one piece of code in the bundle: its `verdict` is what its check said.
    pub iterations: Vec<StepView>,
}

/// A job's budget as the page shows it and its form edits it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    /// Each limit with what is used of it (`$0.40 of $1.00 · …`); empty for no limit.
    pub used: String,
    /// A limit is reached: the job pauses, and resumes only once it is raised.
    pub spent: bool,
    /// The limits as the form shows them (empty: none).
    pub cost_usd: String,
    pub tokens: String,
    pub minutes: String,
    /// The runtime reports prices, so a cost limit can be set.
    pub priced: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogTail {
    pub step_index: usize,
    pub title: String,
    pub running: bool,
    /// The newest lines, oldest first.
    pub lines: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    pub index: usize,
    pub number: usize,
    pub title: String,
    pub skill: String,
    pub state: StepState,
    pub duration: String,
    /// While it runs: when it started (ms since the epoch), for the page to count on.
    pub since: Option<i64>,
    /// What the step's latest run used, as its CLI reported it; empty when it did not.
    pub usage: String,
    pub log: Option<String>,
    pub patch: Option<String>,
    /// An iteration's: what its check said ("the check failed (exit code 1)").
    pub verdict: String,
    pub passed: bool,
    /// An iteration's: the check's output.
    pub check_log: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancelView {
    pub requested: String,
    pub by: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArtifactView {
    pub name: String,
    pub size: u64,
    /// Its page, which shows a patch as a diff.
    pub href: String,
    pub download: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    pub id: i64,
    pub when: String,
    pub level: String,
    pub kind: String,
    pub message: String,
}
