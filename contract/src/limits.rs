//! Size and range limits of a task, public so a form can mirror them (maxlength, min/max).

use std::ops::RangeInclusive;

pub const PRIORITY: RangeInclusive<i32> = -1000..=1000;
pub const DEFAULT_PRIORITY: i32 = 0;
pub const MAX_ATTEMPTS: RangeInclusive<u32> = 1..=10;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const AFFINITY_KEY_CHARS: usize = 200;
pub const REPOSITORY_CHARS: usize = 2048;
pub const INSTRUCTIONS_CHARS: usize = 100_000;
pub const MODEL_CHARS: usize = 200;
pub const BRANCH_CHARS: usize = 255;
pub const PR_TITLE_CHARS: usize = 256;
pub const STEP_TITLE_CHARS: usize = 200;
pub const STEPS: usize = 100;
/// How many times a task may run its agent before it must meet its completion criteria.
pub const MAX_ITERATIONS: RangeInclusive<u32> = 1..=200;
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
/// A task's completion criteria, as typed.
pub const CRITERIA_CHARS: usize = 10_000;
/// A completion check's command line, and the pattern its output must match.
pub const CHECK_COMMAND_CHARS: usize = 4000;
pub const OUTPUT_PATTERN_CHARS: usize = 1000;
/// How long one run of a completion check may take, in seconds.
pub const CHECK_TIMEOUT_SECONDS: RangeInclusive<u32> = 1..=3600;
pub const DEFAULT_CHECK_TIMEOUT_SECONDS: u32 = 600;
/// How much of the end of a check's output an event carries and the next prompt quotes.
pub const CHECK_OUTPUT_TAIL_BYTES: usize = 4096;
/// Skill ids, step ids and capabilities share this bound: they become directory names,
/// artifact paths and labels, where short is what keeps them readable.
pub const ID_CHARS: usize = 64;
/// A cancel reason, as typed.
pub const CANCEL_REASON_CHARS: usize = 2000;
/// What a worker reports: an event's message and payload (the timeline is for milestones;
/// logs go to artifacts), and a job's `errorMessage` or `resultSummary`. A worker cuts what
/// it sends to these, after redacting it; the server refuses more.
pub const EVENT_MESSAGE_BYTES: usize = 16 * 1024;
pub const EVENT_PAYLOAD_BYTES: usize = 64 * 1024;
pub const REPORTED_TEXT_BYTES: usize = 16 * 1024;
