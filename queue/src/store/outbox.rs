//! The webhook outbox's rows: claimed under a lease, settled under the claim's fence.

use chrono::{DateTime, Utc};
use contract::{JobId, JobState};
use sqlx::Row;
use sqlx::types::Json;

use super::{Id, Ts};
use crate::outbox::{Notice, Settled};
use crate::store::Database;

/// How long a replica's word that it posts is heard: the trigger of migration 0015 says
/// the same (`10 minutes`, `600000` ms).
const LISTENING_LAPSES: chrono::Duration = chrono::Duration::minutes(10);

const CLAIMED: &str = "RETURNING id, job_id, event_id, event, status, attempt, settled, created_at";

impl Database {
    /// Takes up to `limit` notifications due at `now` and not leased to anyone, for `owner`
    /// until `until`; each one's attempt goes up by one.
    pub(crate) async fn claim_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Notice>, sqlx::Error> {
        let sql =
            super::leases::lease_due_sql(self, "webhook_outbox", "id", "", "next_at, id", CLAIMED);
        on_pool!(self, p => {
            let rows = sqlx::query(&sql)
                .bind(owner)
                .bind(Ts(until))
                .bind(Ts(now))
                .bind(limit)
                .fetch_all(p)
                .await?;
            let mut notices = rows
                .iter()
                .map(|row| {
                    let status: String = row.try_get("status")?;
                    let attempt: i64 = row.try_get("attempt")?;
                    Ok(Notice {
                        id: row.try_get("id")?,
                        job_id: JobId::from(row.try_get::<Id, _>("job_id")?.0),
                        event_id: row.try_get("event_id")?,
                        event: row.try_get("event")?,
                        status: status
                            .parse::<JobState>()
                            .map_err(super::decode_err)?,
                        attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                        settled: row.try_get::<Json<Vec<String>>, _>("settled")?.0,
                        created_at: row.try_get::<Ts, _>("created_at")?.0,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            notices.sort_by_key(|n| n.id);
            Ok(notices)
        })
    }

    /// Writes what `owner`'s try `attempt` of notification `id` left; `false` when the
    /// claim is no longer its own (its lease ran out and another took the row), so nothing
    /// was written.
    pub(crate) async fn settle_notice(
        &self,
        id: i64,
        owner: &str,
        attempt: u32,
        settled: &Settled,
    ) -> Result<bool, sqlx::Error> {
        const FENCE: &str = "WHERE id = $1 AND lease_owner = $2 AND attempt = $3";
        let attempt = i64::from(attempt);
        on_pool!(self, p => {
            let done = match settled {
                Settled::Done => {
                    sqlx::query(&format!("DELETE FROM webhook_outbox {FENCE}"))
                        .bind(id)
                        .bind(owner)
                        .bind(attempt)
                        .execute(p)
                        .await?
                }
                Settled::Later { settled, next_at } => {
                    sqlx::query(&format!(
                        "UPDATE webhook_outbox SET settled = $4, next_at = $5, \
                         lease_owner = NULL, lease_until = NULL {FENCE}"
                    ))
                    .bind(id)
                    .bind(owner)
                    .bind(attempt)
                    .bind(Json(settled))
                    .bind(Ts(*next_at))
                    .execute(p)
                    .await?
                }
            };
            Ok(done.rows_affected() == 1)
        })
    }

    /// Says that `replica` posts webhooks, as of `now`: while one has said so within the
    /// last ten minutes, the database writes a notification for each end.
    pub(crate) async fn listen_notices(
        &self,
        replica: &str,
        now: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        // Replicas that stopped saying so (each start is a replica of its own) go, so the
        // trigger's lookup stays a glance at the live few.
        let lapsed = now - LISTENING_LAPSES;
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO webhook_listeners (replica, seen_at) VALUES ($1, $2) \
                 ON CONFLICT (replica) DO UPDATE SET seen_at = excluded.seen_at",
            )
            .bind(replica)
            .bind(Ts(now))
            .execute(p)
            .await?;
            sqlx::query("DELETE FROM webhook_listeners WHERE seen_at <= $1")
                .bind(Ts(lapsed))
                .execute(p)
                .await?;
            Ok(())
        })
    }

    /// The notifications not yet settled.
    pub(crate) async fn count_notices(&self) -> Result<i64, sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT COUNT(*) FROM webhook_outbox")
                .fetch_one(p)
                .await
        })
    }
}
