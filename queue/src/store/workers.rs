//! The worker registry.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::types::Json;

use super::Ts;
use crate::store::Database;
use crate::workers::{Sighting, WorkerRecord};

impl Database {
    /// Inserts or refreshes a worker's row; what the sighting leaves out (`None`) keeps
    /// what the row has.
    pub(crate) async fn upsert_worker(
        &self,
        id: &str,
        seen: &Sighting<'_>,
        now: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        let caps: Vec<String> = seen
            .capabilities
            .map(<[String]>::to_vec)
            .unwrap_or_default();
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO workers (id, capabilities, version, sandbox, first_seen_at, last_seen_at) \
                 VALUES ($1, $2, $3, $6, $4, $4) ON CONFLICT (id) DO UPDATE SET \
                 capabilities = CASE WHEN $5 THEN excluded.capabilities \
                 ELSE workers.capabilities END, \
                 version = COALESCE(excluded.version, workers.version), \
                 sandbox = COALESCE(excluded.sandbox, workers.sandbox), \
                 last_seen_at = excluded.last_seen_at",
            )
            .bind(id)
            .bind(Json(&caps))
            .bind(seen.version)
            .bind(Ts(now))
            .bind(seen.capabilities.is_some())
            .bind(seen.sandbox)
            .execute(p)
            .await?;
            Ok(())
        })
    }

    pub(crate) async fn list_workers(&self) -> Result<Vec<WorkerRecord>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(
                "SELECT id, capabilities, version, sandbox, first_seen_at, last_seen_at FROM workers \
                 ORDER BY last_seen_at DESC, id",
            )
            .fetch_all(p)
            .await?;
            rows.iter()
                .map(|row| {
                    Ok(WorkerRecord {
                        id: row.try_get("id")?,
                        capabilities: row.try_get::<Json<Vec<String>>, _>("capabilities")?.0,
                        version: row.try_get("version")?,
                        sandbox: row.try_get("sandbox")?,
                        first_seen_at: row.try_get::<Ts, _>("first_seen_at")?.0,
                        last_seen_at: row.try_get::<Ts, _>("last_seen_at")?.0,
                        running_jobs: Vec::new(),
                    })
                })
                .collect()
        })
    }
}
