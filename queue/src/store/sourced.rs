//! The job a source made, by the source's key: what asked on GitHub, a schedule's slot (each
//! a unique index of migrations 0018 and 0019).

use contract::JobId;
use contract::source::JobSource;

use super::Id;
use crate::store::Database;

impl Database {
    /// The job `source` made, if one did.
    pub(crate) async fn job_of_source(
        &self,
        source: &JobSource,
    ) -> Result<Option<JobId>, sqlx::Error> {
        let sqlite = matches!(self, Database::Sqlite(_));
        let (sql, first, second) = match (source, sqlite) {
            (JobSource::Github { event, .. }, true) => (
                "SELECT id FROM jobs WHERE json_extract(payload, '$.source.event') = $1",
                event,
                None,
            ),
            (JobSource::Github { event, .. }, false) => (
                "SELECT id FROM jobs WHERE payload ? 'source' \
                 AND payload #>> '{source,event}' = $1",
                event,
                None,
            ),
            (JobSource::Schedule { schedule, slot, .. }, true) => (
                "SELECT id FROM jobs WHERE json_extract(payload, '$.source.kind') = 'schedule' \
                 AND json_extract(payload, '$.source.schedule') = $1 \
                 AND json_extract(payload, '$.source.slot') = $2",
                schedule,
                Some(slot),
            ),
            (JobSource::Schedule { schedule, slot, .. }, false) => (
                "SELECT id FROM jobs WHERE payload ? 'source' \
                 AND payload #>> '{source,kind}' = 'schedule' \
                 AND payload #>> '{source,schedule}' = $1 AND payload #>> '{source,slot}' = $2",
                schedule,
                Some(slot),
            ),
        };
        let found: Option<Id> = on_pool!(self, p => {
            let mut query = sqlx::query_scalar(sql).bind(first.as_str());
            if let Some(second) = second {
                query = query.bind(second.as_str());
            }
            query.fetch_optional(p).await
        })?;
        Ok(found.map(|id| JobId::from(id.0)))
    }
}
