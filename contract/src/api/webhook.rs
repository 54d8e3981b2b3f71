//! What the server posts to a webhook when a job ends or waits for approval, and how it
//! signs it: `Stepwise-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
//! with the server's webhook secret, as GitHub and Stripe sign theirs. A receiver checks
//! the HMAC over the raw body, and that `t` is recent.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::job::JobState;
use crate::usage::StepUsage;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "Stepwise-Signature";
/// The header that names the event, as the body's `event` does.
pub const EVENT_HEADER: &str = "Stepwise-Event";
/// The header that names the delivery, the same on each of its retries.
pub const DELIVERY_HEADER: &str = "Stepwise-Delivery";

/// `event`: the job ended (succeeded, failed, cancelled or dead-lettered).
pub const JOB_ENDED: &str = "job.ended";
/// `event`: the job's steps are done and it waits for an operator's approval to publish.
pub const JOB_AWAITING_APPROVAL: &str = "job.awaiting_approval";
/// `event`: the job's usage reached a limit of its budget; it pauses for an operator to
/// raise the budget (and resume) or cancel it.
pub const JOB_BUDGET_EXCEEDED: &str = "job.budget_exceeded";

/// `event`: the job's pull request has feedback no more rounds of its own will take: a
/// person is asked to look.
pub const JOB_NEEDS_ATTENTION: &str = "job.needs_attention";

/// The events a webhook is posted, as the outbox names them.
pub const EVENTS: [&str; 4] = [
    JOB_ENDED,
    JOB_AWAITING_APPROVAL,
    JOB_BUDGET_EXCEEDED,
    JOB_NEEDS_ATTENTION,
];

/// The text that is signed: the timestamp, a dot, the raw body.
pub fn signed_text(timestamp: i64, body: &str) -> String {
    format!("{timestamp}.{body}")
}

/// A webhook's body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookBody {
    /// One of [`EVENTS`].
    pub event: String,
    /// One delivery's id, the same on its retries: a receiver can drop a repeat.
    pub delivery_id: String,
    pub sent_at: DateTime<Utc>,
    pub job: WebhookJob,
}

/// The job, as a notification tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookJob {
    pub id: String,
    pub state: JobState,
    /// The objective's first line.
    pub title: String,
    pub repository: String,
    pub runtime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the job reported when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The pull request it opened (http(s) only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<String>,
    /// The branch it pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// From its first claim to its end (or to the wait for approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// What its steps reported they cost, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Everything its steps reported they used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StepUsage>,
    /// Its budget (`task.budget`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::JobBudget>,
    /// Its page on the dashboard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}
