//! A pull request's feedback as a job takes it (`task.publish.feedback`): after the pull
//! request is published, the server watches its checks and reviews, and a failed check or
//! a review that asks for changes becomes the job's next round, up to `maxRounds`.

use serde::{Deserialize, Serialize};

/// `task.publish.feedback`; absent: the job ends at its pull request.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrFeedback {
    /// A failed check run becomes a round: its name and the end of its log.
    pub ci: bool,
    /// A review that requests changes becomes a round: its body and its line comments.
    pub reviews: bool,
    /// The most rounds feedback makes; then the job asks for a person.
    pub max_rounds: u32,
}

impl PrFeedback {
    pub const DEFAULT_MAX_ROUNDS: u32 = 3;
    pub const MAX_ROUNDS: std::ops::RangeInclusive<u32> = 1..=20;
}
