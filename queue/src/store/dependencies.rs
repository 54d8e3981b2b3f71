//! The edges between a job and the jobs it waits for: written with the job, read both
//! ways, settled as the jobs they name end; and the release of a job whose wait is over.

use chrono::{DateTime, Utc};
use contract::{JobId, JobState};
use sqlx::Row;

use super::{Id, Ts};
use crate::store::Database;

/// An edge whose job ended while another waited for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    pub job_id: JobId,
    pub depends_on: JobId,
    pub status: JobState,
}

impl Database {
    /// Job `id` waits for each of `on`.
    pub(crate) async fn insert_dependencies(
        &self,
        id: &JobId,
        on: &[JobId],
    ) -> Result<(), sqlx::Error> {
        on_pool!(self, p => {
            for dependency in on {
                sqlx::query(
                    "INSERT INTO job_dependencies (job_id, depends_on) VALUES ($1, $2) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(Id(id.uuid()))
                .bind(Id(dependency.uuid()))
                .execute(p)
                .await?;
            }
            Ok(())
        })
    }

    /// The jobs `id` waits for, each with its edge's state (`waiting`, `met`, `broken`).
    pub(crate) async fn dependencies_of(
        &self,
        id: &JobId,
    ) -> Result<Vec<(JobId, String)>, sqlx::Error> {
        self.edges("SELECT depends_on AS other, state FROM job_dependencies WHERE job_id = $1 ORDER BY depends_on", id).await
    }

    /// The jobs that wait (or waited) for `id`, each with its edge's state.
    pub(crate) async fn dependents_of(
        &self,
        id: &JobId,
    ) -> Result<Vec<(JobId, String)>, sqlx::Error> {
        self.edges("SELECT job_id AS other, state FROM job_dependencies WHERE depends_on = $1 ORDER BY job_id", id).await
    }

    async fn edges(&self, sql: &str, id: &JobId) -> Result<Vec<(JobId, String)>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(sql).bind(Id(id.uuid())).fetch_all(p).await?;
            rows.iter()
                .map(|row| Ok((JobId::from(row.try_get::<Id, _>("other")?.0), row.try_get("state")?)))
                .collect()
        })
    }

    /// The jobs `id` waits (or waited) for, each with its state now.
    pub(crate) async fn dependency_states(
        &self,
        id: &JobId,
    ) -> Result<Vec<(JobId, JobState)>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(concat!(
                "SELECT d.depends_on, ",
                live!("status"),
                " AS status FROM job_dependencies d \
                 JOIN jobs j ON j.id = d.depends_on LEFT JOIN job_queue q ON q.id = j.id \
                 WHERE d.job_id = $1 ORDER BY d.depends_on"
            ))
            .bind(Id(id.uuid()))
            .fetch_all(p)
            .await?;
            rows.iter()
                .map(|row| {
                    let status: String = row.try_get("status")?;
                    Ok((
                        JobId::from(row.try_get::<Id, _>("depends_on")?.0),
                        status.parse().unwrap_or(JobState::Queued),
                    ))
                })
                .collect()
        })
    }

    /// Waiting edges whose job has ended, up to `limit`.
    pub(crate) async fn ended_dependencies(&self, limit: i64) -> Result<Vec<Ended>, sqlx::Error> {
        on_pool!(self, p => {
            // A live job's own status is never one of these (`live.rs`): no live row to read.
            let rows = sqlx::query(
                "SELECT d.job_id, d.depends_on, j.status FROM job_dependencies d \
                 JOIN jobs j ON j.id = d.depends_on WHERE d.state = 'waiting' \
                 AND j.status IN ('succeeded', 'failed', 'cancelled', 'dead_letter') LIMIT $1",
            )
            .bind(limit)
            .fetch_all(p)
            .await?;
            rows.iter()
                .map(|row| {
                    let status: String = row.try_get("status")?;
                    Ok(Ended {
                        job_id: JobId::from(row.try_get::<Id, _>("job_id")?.0),
                        depends_on: JobId::from(row.try_get::<Id, _>("depends_on")?.0),
                        status: status.parse().unwrap_or(JobState::Failed),
                    })
                })
                .collect()
        })
    }

    /// Settles an edge `met` or `broken`; `false` when another replica did first.
    pub(crate) async fn settle_dependency(
        &self,
        ended: &Ended,
        met: bool,
    ) -> Result<bool, sqlx::Error> {
        on_pool!(self, p => {
            let done = sqlx::query(
                "UPDATE job_dependencies SET state = $3 \
                 WHERE job_id = $1 AND depends_on = $2 AND state = 'waiting'",
            )
            .bind(Id(ended.job_id.uuid()))
            .bind(Id(ended.depends_on.uuid()))
            .bind(if met { "met" } else { "broken" })
            .execute(p)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Job `id`, queued and waiting, may start at `now`; whether it was waiting.
    pub(crate) async fn release_waiting(
        &self,
        id: &JobId,
        waiting_start: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        on_pool!(self, p => {
            let done = sqlx::query(
                "UPDATE job_queue SET next_attempt_at = $2, updated_at = $2 \
                 WHERE id = $1 AND status = 'queued' AND next_attempt_at >= $3",
            )
            .bind(Id(id.uuid()))
            .bind(Ts(now))
            .bind(Ts(waiting_start))
            .execute(p)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }
}
