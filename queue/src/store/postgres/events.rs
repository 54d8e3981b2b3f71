//! Many events appended in one statement.

use chrono::{DateTime, Utc};
use contract::JobId;
use serde_json::{Map, Value};
use sqlx::PgConnection;
use sqlx::types::Json;

use crate::QueueError;
use crate::machine::PendingEvent;
use crate::store::Ts;

/// `INSERT_EVENT` for many rows, inserted in the order of the arrays.
const INSERT_EVENTS_POSTGRES: &str = "INSERT INTO job_events \
     (job_id, kind, level, message, payload, created_at) \
     SELECT e.job_id, e.kind, e.level, e.message, e.payload, $6 \
     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::jsonb[]) \
       WITH ORDINALITY AS e(job_id, kind, level, message, payload, n) \
     ORDER BY e.n RETURNING id";

/// Appends events (of any jobs) in the order given; returns their ids, in that order.
pub(crate) async fn insert_events(
    t: &mut PgConnection,
    events: &[(JobId, &PendingEvent)],
    now: DateTime<Utc>,
) -> Result<Vec<i64>, QueueError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let job_ids: Vec<_> = events.iter().map(|(id, _)| id.uuid()).collect();
    let text = |f: fn(&PendingEvent) -> &str| events.iter().map(|(_, e)| f(e)).collect::<Vec<_>>();
    let payloads: Vec<Json<&Map<String, Value>>> =
        events.iter().map(|(_, e)| Json(&e.payload)).collect();
    let mut ids: Vec<i64> = sqlx::query_scalar(INSERT_EVENTS_POSTGRES)
        .bind(job_ids)
        .bind(text(|e| &e.kind))
        .bind(text(|e| e.level.as_str()))
        .bind(text(|e| &e.message))
        .bind(payloads)
        .bind(Ts(now))
        .fetch_all(t)
        .await?;
    // Rows are inserted in ordinality order, so the identity hands out ascending ids in
    // that order whatever order RETURNING lists them in.
    ids.sort_unstable();
    if ids.len() != events.len() {
        return Err(sqlx::Error::RowNotFound.into());
    }
    Ok(ids)
}
