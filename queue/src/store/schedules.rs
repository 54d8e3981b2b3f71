//! The schedules' rows: made, read, paused and resumed, deleted; leased when due and moved
//! to their next slot under the lease's fence.

use chrono::{DateTime, Utc};
use contract::JobId;
use contract::api::{Overlap, Schedule};
use sqlx::Row;
use uuid::Uuid;

use super::{Id, Ts};
use crate::store::Database;

const COLUMNS: &str = "id, name, cron, timezone, task, overlap, catch_up, paused, next_at, \
    last_slot, last_job_id, skipped, attempt, created_by_user_id, created_at, updated_at";

/// A schedule as a pass leased it: the row, and the fence its settling is written under.
#[derive(Debug, Clone)]
pub(crate) struct Leased {
    pub schedule: Schedule,
    pub attempt: i64,
}

/// What a pass leaves of a due schedule.
#[derive(Debug, Clone)]
pub(crate) struct Passed {
    pub next_at: DateTime<Utc>,
    pub last_slot: DateTime<Utc>,
    pub job: Option<JobId>,
    pub skipped: u64,
    /// The cron never comes again: the schedule is paused.
    pub ended: bool,
}

macro_rules! schedule_of {
    ($row:expr) => {{
        let row = $row;
        let overlap: String = row.try_get("overlap")?;
        let task: String = row.try_get("task")?;
        let skipped: i64 = row.try_get("skipped")?;
        let id: Id = row.try_get("id")?;
        let last_job: Option<Id> = row.try_get("last_job_id")?;
        let ts =
            |key: &str| -> Result<DateTime<Utc>, sqlx::Error> { Ok(row.try_get::<Ts, _>(key)?.0) };
        let optional_ts = |key: &str| -> Result<Option<DateTime<Utc>>, sqlx::Error> {
            Ok(row.try_get::<Option<Ts>, _>(key)?.map(|t| t.0))
        };
        Leased {
            schedule: Schedule {
                id: id.0.to_string(),
                name: row.try_get("name")?,
                cron: row.try_get("cron")?,
                timezone: row.try_get("timezone")?,
                task: serde_json::from_str(&task).unwrap_or(serde_json::Value::Null),
                overlap: overlap.parse().unwrap_or(Overlap::Skip),
                catch_up: row.try_get("catch_up")?,
                paused: row.try_get("paused")?,
                next_at: ts("next_at")?,
                last_slot: optional_ts("last_slot")?,
                last_job_id: last_job.map(|id| JobId::from(id.0)),
                skipped: u64::try_from(skipped).unwrap_or(0),
                created_by_user_id: row.try_get("created_by_user_id")?,
                created_at: ts("created_at")?,
                updated_at: ts("updated_at")?,
            },
            attempt: row.try_get("attempt")?,
        }
    }};
}

impl Database {
    /// Stores `schedule`; `false` when its name is taken.
    pub(crate) async fn insert_schedule(&self, schedule: &Schedule) -> Result<bool, sqlx::Error> {
        let id = Uuid::parse_str(&schedule.id).unwrap_or_default();
        on_pool!(self, p => {
            let done = sqlx::query(
                "INSERT INTO schedules (id, name, cron, timezone, task, overlap, catch_up, \
                 paused, next_at, created_by_user_id, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) \
                 ON CONFLICT (name) DO NOTHING",
            )
            .bind(Id(id))
            .bind(&schedule.name)
            .bind(&schedule.cron)
            .bind(&schedule.timezone)
            .bind(schedule.task.to_string())
            .bind(schedule.overlap.as_str())
            .bind(schedule.catch_up)
            .bind(schedule.paused)
            .bind(Ts(schedule.next_at))
            .bind(&schedule.created_by_user_id)
            .bind(Ts(schedule.created_at))
            .execute(p)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Every schedule, by name.
    pub(crate) async fn list_schedules(&self) -> Result<Vec<Schedule>, sqlx::Error> {
        let sql = format!("SELECT {COLUMNS} FROM schedules ORDER BY name");
        on_pool!(self, p => {
            let rows = sqlx::query(&sql).fetch_all(p).await?;
            rows.iter().map(|row| Ok(schedule_of!(row).schedule)).collect()
        })
    }

    pub(crate) async fn get_schedule(&self, id: Uuid) -> Result<Option<Schedule>, sqlx::Error> {
        let sql = format!("SELECT {COLUMNS} FROM schedules WHERE id = $1");
        on_pool!(self, p => {
            let row = sqlx::query(&sql).bind(Id(id)).fetch_optional(p).await?;
            row.map(|row| Ok(schedule_of!(&row).schedule)).transpose()
        })
    }

    /// Pauses schedule `id`, or resumes it to its slot `next_at`; whether it exists.
    pub(crate) async fn set_schedule_paused(
        &self,
        id: Uuid,
        paused: bool,
        next_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        on_pool!(self, p => {
            let done = sqlx::query(
                "UPDATE schedules SET paused = $2, next_at = COALESCE($3, next_at), \
                 lease_owner = NULL, lease_until = NULL, updated_at = $4 WHERE id = $1",
            )
            .bind(Id(id))
            .bind(paused)
            .bind(next_at.map(Ts))
            .bind(Ts(now))
            .execute(p)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    pub(crate) async fn delete_schedule(&self, id: Uuid) -> Result<bool, sqlx::Error> {
        on_pool!(self, p => {
            let done = sqlx::query("DELETE FROM schedules WHERE id = $1")
                .bind(Id(id))
                .execute(p)
                .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Leases up to `limit` schedules due at `now`, not paused and leased to no one, to
    /// `owner` until `until`; each one's attempt goes up by one.
    pub(crate) async fn claim_schedules(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Leased>, sqlx::Error> {
        // Each backend's words for the partial index's own condition, so the pick uses it.
        let not_paused = match self {
            Database::Sqlite(_) => "paused = 0",
            Database::Postgres(_) => "NOT paused",
        };
        let returning = format!("RETURNING {COLUMNS}");
        let sql = super::leases::lease_due_sql(
            self,
            "schedules",
            "id",
            not_paused,
            "next_at",
            &returning,
        );
        on_pool!(self, p => {
            let rows = sqlx::query(&sql)
                .bind(owner)
                .bind(Ts(until))
                .bind(Ts(now))
                .bind(limit)
                .fetch_all(p)
                .await?;
            rows.iter().map(|row| Ok(schedule_of!(row))).collect()
        })
    }

    /// Moves a leased schedule on; `false` when the lease is no longer `owner`'s (it ran
    /// out and another replica took it, or the schedule was paused or deleted meanwhile).
    pub(crate) async fn settle_schedule(
        &self,
        leased: &Leased,
        owner: &str,
        passed: &Passed,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        let id = Uuid::parse_str(&leased.schedule.id).unwrap_or_default();
        on_pool!(self, p => {
            let done = sqlx::query(
                "UPDATE schedules SET next_at = $4, last_slot = $5, \
                 last_job_id = COALESCE($6, last_job_id), skipped = skipped + $7, \
                 paused = (paused OR $8), lease_owner = NULL, lease_until = NULL, \
                 updated_at = $9 WHERE id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(Id(id))
            .bind(owner)
            .bind(leased.attempt)
            .bind(Ts(passed.next_at))
            .bind(Ts(passed.last_slot))
            .bind(passed.job.map(|j| Id(j.uuid())))
            .bind(i64::try_from(passed.skipped).unwrap_or(i64::MAX))
            .bind(passed.ended)
            .bind(Ts(now))
            .execute(p)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }
}
