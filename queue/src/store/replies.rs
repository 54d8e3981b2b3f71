//! The issue replies' rows: leased when due, settled under the lease's fence, armed again
//! for a round, and read for the job a pull request belongs to.

use chrono::{DateTime, Utc};
use contract::JobId;
use sqlx::Row;

use super::{Id, Ts};
use crate::reply::{Replied, Reply};
use crate::store::Database;

impl Database {
    /// Leases up to `limit` replies due at `now` and leased to no one, to `owner` until
    /// `until`; each one's attempt goes up by one.
    pub(crate) async fn claim_replies(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Reply>, sqlx::Error> {
        let sql = super::leases::lease_due_sql(
            self,
            "issue_replies",
            "job_id",
            "state = 'due'",
            "next_at",
            "RETURNING job_id, issue, comment_id, version, failures, attempt",
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
                    let number = |key: &str| -> Result<i64, sqlx::Error> { row.try_get(key) };
                    Ok(Reply {
                        job_id: JobId::from(row.try_get::<Id, _>("job_id")?.0),
                        issue: row.try_get("issue")?,
                        comment_id: row
                            .try_get::<Option<i64>, _>("comment_id")?
                            .and_then(|c| u64::try_from(c).ok()),
                        version: u64::try_from(number("version")?).unwrap_or(0),
                        failures: u32::try_from(number("failures")?).unwrap_or(u32::MAX),
                        attempt: u32::try_from(number("attempt")?).unwrap_or(u32::MAX),
                    })
                })
                .collect()
        })
    }

    /// Writes what `owner`'s write of `reply` left; `false` when the lease is no longer its
    /// own. A comment written is kept whatever else happened meanwhile, and a reply whose
    /// job ended during the write stays due.
    pub(crate) async fn settle_reply(
        &self,
        reply: &Reply,
        owner: &str,
        replied: &Replied,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        let (state, comment, pull, failures, next_at) = match replied {
            Replied::Posted { comment_id, pull } => {
                ("posted", Some(*comment_id), pull.clone(), 0, now)
            }
            Replied::Done { comment_id, pull } => ("done", Some(*comment_id), pull.clone(), 0, now),
            Replied::Retry { next_at } => {
                ("due", None, None, i64::from(reply.failures) + 1, *next_at)
            }
            Replied::GaveUp => ("done", None, None, i64::from(reply.failures) + 1, now),
        };
        let comment = comment.and_then(|c| i64::try_from(c).ok());
        let version = i64::try_from(reply.version).unwrap_or(i64::MAX);
        on_pool!(self, p => {
            let done = sqlx::query(
                "UPDATE issue_replies SET comment_id = COALESCE($4, comment_id), \
                 pull = COALESCE($5, pull), failures = $6, \
                 state = CASE WHEN version = $7 THEN $8 ELSE 'due' END, \
                 next_at = CASE WHEN version = $7 THEN $9 ELSE $10 END, \
                 lease_owner = NULL, lease_until = NULL, updated_at = $10 \
                 WHERE job_id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(Id(reply.job_id.uuid()))
            .bind(owner)
            .bind(i64::from(reply.attempt))
            .bind(comment)
            .bind(pull)
            .bind(failures)
            .bind(version)
            .bind(state)
            .bind(Ts(next_at))
            .bind(Ts(now))
            .execute(p)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Job `id`'s reply is to be written anew on `issue` (a round a mention there made):
    /// a new comment, due now.
    pub(crate) async fn rearm_reply(
        &self,
        id: &JobId,
        issue: &str,
        now: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO issue_replies (job_id, issue, state, next_at, updated_at) \
                 VALUES ($1, $2, 'due', $3, $3) \
                 ON CONFLICT (job_id) DO UPDATE SET issue = excluded.issue, comment_id = NULL, \
                 state = 'due', version = issue_replies.version + 1, failures = 0, \
                 next_at = excluded.next_at, lease_owner = NULL, lease_until = NULL, \
                 updated_at = excluded.updated_at",
            )
            .bind(Id(id.uuid()))
            .bind(issue)
            .bind(Ts(now))
            .execute(p)
            .await?;
            Ok(())
        })
    }

    /// The job that opened pull request `pull`, as a reply or a feedback watch read it.
    pub(crate) async fn job_of_pull(&self, pull: &str) -> Result<Option<JobId>, sqlx::Error> {
        let found: Option<Id> = on_pool!(self, p => {
            sqlx::query_scalar(
                "SELECT job_id FROM issue_replies WHERE pull = $1 \
                 UNION ALL SELECT job_id FROM pr_watches WHERE pull = $1 LIMIT 1",
            )
            .bind(pull)
            .fetch_optional(p)
            .await
        })?;
        Ok(found.map(|id| JobId::from(id.0)))
    }

    /// The state of job `id`'s reply and its comment, if it has one.
    pub(crate) async fn reply_state(
        &self,
        id: &JobId,
    ) -> Result<Option<(String, Option<i64>)>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT state, comment_id FROM issue_replies WHERE job_id = $1")
                .bind(Id(id.uuid()))
                .fetch_optional(p)
                .await?;
            row.map(|r| Ok((r.try_get("state")?, r.try_get("comment_id")?)))
                .transpose()
        })
    }
}
