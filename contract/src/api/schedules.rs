//! The bodies of the schedules' routes (`/api/queue/schedules…`): a recurring task, the
//! request that makes one, and the list. As in `jobs`, doc comments here are the OpenAPI
//! document's descriptions.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JobId;
use crate::wire_names;

/// What a slot does while the schedule's previous job is still queued or running.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    /// Makes no job: the previous one still has the work.
    #[default]
    Skip,
    /// Makes its job anyway: it waits in the queue behind the previous one.
    Queue,
}

wire_names!(Overlap, "overlap", exact { Skip = "skip", Queue = "queue" });

/// `POST /api/queue/schedules`: a task that recurs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleRequest {
    /// Unique; 1 to 100 characters.
    pub name: String,
    /// Five fields (minute hour day-of-month month day-of-week), as `0 6 * * 1`.
    pub cron: String,
    /// An IANA time zone the cron is read in, as `Europe/Berlin` (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The job request each slot queues, as `POST /api/queue/jobs` takes it.
    pub task: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    /// After downtime, run the latest slot that was missed (only that one); by default a
    /// missed slot is not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<bool>,
}

/// A recurring task.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub id: String,
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub task: Value,
    pub overlap: Overlap,
    pub catch_up: bool,
    pub paused: bool,
    /// The next slot, in UTC.
    pub next_at: DateTime<Utc>,
    /// The latest slot that came (whether it made a job or was skipped).
    pub last_slot: Option<DateTime<Utc>>,
    /// The job the latest slot that made one made.
    pub last_job_id: Option<JobId>,
    /// Slots that made no job, since the schedule was made: their previous job was still
    /// going (`overlap: skip`), or they were missed while no server ran.
    pub skipped: u64,
    pub created_by_user_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `GET /api/queue/schedules`: every schedule, by name.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleList {
    pub items: Vec<Schedule>,
}
