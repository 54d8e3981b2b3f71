//! The pull request watches' rows: leased when due, ended or put off under the lease's
//! fence, and brought forward when GitHub says a pull request changed.

use chrono::{DateTime, Utc};
use contract::JobId;
use sqlx::Row;

use super::{Id, Ts};
use crate::store::Database;
use crate::watch::{Looked, Watch};

impl Database {
    /// Leases up to `limit` watches due at `now` and leased to no one, to `owner` until
    /// `until`; each one's attempt goes up by one.
    pub(crate) async fn claim_watches(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Watch>, sqlx::Error> {
        let sql = super::leases::lease_due_sql(
            self,
            "pr_watches",
            "job_id",
            "state = 'watching'",
            "next_at",
            "RETURNING job_id, pull, quiet, attempt",
        );
        on_pool!(self, p => {
            let rows = sqlx::query(&sql)
                .bind(owner)
                .bind(Ts(until))
                .bind(Ts(now))
                .bind(limit)
                .fetch_all(p)
                .await?;
            rows.iter()
                .map(|row| {
                    let quiet: i64 = row.try_get("quiet")?;
                    let attempt: i64 = row.try_get("attempt")?;
                    Ok(Watch {
                        job_id: JobId::from(row.try_get::<Id, _>("job_id")?.0),
                        pull: row.try_get("pull")?,
                        quiet: u32::try_from(quiet).unwrap_or(u32::MAX),
                        attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                    })
                })
                .collect()
        })
    }

    /// Writes what `owner`'s look at `watch` left; `false` when the lease is no longer its
    /// own (it ran out and another replica took the row, or a new completion renewed the
    /// watch), so nothing was written.
    pub(crate) async fn settle_watch(
        &self,
        watch: &Watch,
        owner: &str,
        looked: &Looked,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        let (state, next_at, quiet, pull) = match looked {
            Looked::Later {
                next_at,
                quiet,
                pull,
            } => ("watching", *next_at, i64::from(*quiet), pull.clone()),
            Looked::Closed => ("closed", now, 0, watch.pull.clone()),
            Looked::NeedsAttention => ("needs_attention", now, 0, watch.pull.clone()),
        };
        on_pool!(self, p => {
            let done = sqlx::query(
                "UPDATE pr_watches SET state = $4, next_at = $5, quiet = $6, pull = $7, \
                 lease_owner = NULL, lease_until = NULL, updated_at = $8 \
                 WHERE job_id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(Id(watch.job_id.uuid()))
            .bind(owner)
            .bind(i64::from(watch.attempt))
            .bind(state)
            .bind(Ts(next_at))
            .bind(quiet)
            .bind(pull)
            .bind(Ts(now))
            .execute(p)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Brings the watches of pull request `pull` forward to `now` (those not due yet); how
    /// many it watches.
    pub(crate) async fn nudge_watches(
        &self,
        pull: &str,
        now: DateTime<Utc>,
    ) -> Result<u64, sqlx::Error> {
        on_pool!(self, p => {
            let done = sqlx::query(
                "UPDATE pr_watches SET quiet = 0, \
                 next_at = CASE WHEN next_at > $2 THEN $2 ELSE next_at END \
                 WHERE pull = $1 AND state = 'watching'",
            )
            .bind(pull)
            .bind(Ts(now))
            .execute(p)
            .await?;
            Ok(done.rows_affected())
        })
    }

    /// Which of `ids` have a watch that asks for a person.
    pub(crate) async fn needing_attention(&self, ids: &[JobId]) -> Result<Vec<JobId>, sqlx::Error> {
        // Few watches ever ask: read them all and keep the ones asked about.
        let asked: Vec<Id> = on_pool!(self, p => {
            sqlx::query_scalar("SELECT job_id FROM pr_watches WHERE state = 'needs_attention'")
                .fetch_all(p)
                .await
        })?;
        Ok(asked
            .into_iter()
            .map(|id| JobId::from(id.0))
            .filter(|id| ids.contains(id))
            .collect())
    }

    /// The state of job `id`'s watch, if it has one.
    pub(crate) async fn watch_state(&self, id: &JobId) -> Result<Option<String>, sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT state FROM pr_watches WHERE job_id = $1")
                .bind(Id(id.uuid()))
                .fetch_optional(p)
                .await
        })
    }
}
