//! Artifact metadata, and on PostgreSQL their bytes in chunks so every replica can serve
//! them.

use contract::{Artifact, JobId};
use sqlx::Row;
use uuid::Uuid;

use super::postgres;
use super::sqlite::RowExt;
use super::{Arg, Id, Tx, TxConn, decode_err, parse_id, pg_rows, sqlite_rows};
use crate::QueueError;
use crate::store::{Database, PgDb};

const UPSERT_ARTIFACT: &str = concat!(
    "INSERT INTO artifacts (",
    artifact_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (job_id, name) DO UPDATE SET size = excluded.size, \
     content_type = excluded.content_type, sha256 = excluded.sha256, \
     created_at = excluded.created_at \
     RETURNING ",
    artifact_columns!()
);

impl Tx {
    /// The names of the job's artifacts, to refuse one that runs into another's path.
    pub(crate) async fn artifact_names(
        &mut self,
        job_id: &JobId,
    ) -> Result<Vec<String>, QueueError> {
        let args = [Arg::Id(job_id.uuid())];
        const SQL: &str = "SELECT name FROM artifacts WHERE job_id = $1";
        Ok(match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, SQL, &args, |r| r.try_get::<String, _>("name"))?,
            TxConn::Postgres(t) => {
                pg_rows(t, SQL, &args, |r| r.try_get::<String, _>("name")).await?
            }
        })
    }

    /// PostgreSQL: stores the artifact's bytes as chunks (see `postgres::artifacts`),
    /// replacing those of an upload it replaces, in this transaction (so a reader sees the
    /// old bytes or the new, never a mix). SQLite keeps files instead: nothing to do.
    pub(crate) async fn replace_artifact_chunks(
        &mut self,
        artifact_id: &str,
        file: &std::path::Path,
    ) -> Result<(), QueueError> {
        match &mut self.conn {
            TxConn::Postgres(t) => postgres::replace_artifact_chunks(t, artifact_id, file).await,
            TxConn::Sqlite(_) => Ok(()),
        }
    }

    /// Inserts or, for a name the job already has, replaces (keeping the artifact's id).
    pub(crate) async fn upsert_artifact(&mut self, a: &Artifact) -> Result<Artifact, QueueError> {
        let args = [
            Arg::Id(parse_id(&a.id)?),
            Arg::Id(a.job_id.uuid()),
            Arg::text(&a.name),
            Arg::BigInt(i64::try_from(a.size).map_err(decode_err)?),
            Arg::text(&a.content_type),
            Arg::text(&a.sha256),
            Arg::at(a.created_at),
        ];
        let rows = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, UPSERT_ARTIFACT, &args, |r| artifact_from_row!(r))?,
            TxConn::Postgres(t) => {
                pg_rows(t, UPSERT_ARTIFACT, &args, |r| artifact_from_row!(r)).await?
            }
        };
        Ok(rows.into_iter().next().ok_or(sqlx::Error::RowNotFound)?)
    }
}

impl Database {
    pub(crate) async fn list_artifacts(&self, job_id: Uuid) -> Result<Vec<Artifact>, sqlx::Error> {
        on_pool!(self, p => {
            let rows = sqlx::query(concat!(
                "SELECT ",
                artifact_columns!(),
                " FROM artifacts WHERE job_id = $1 ORDER BY name"
            ))
            .bind(Id(job_id))
            .fetch_all(p)
            .await?;
            rows.iter().map(|row| artifact_from_row!(row)).collect()
        })
    }

    /// Up to `limit` stored chunks of an artifact from chunk `from` on, in order
    /// (PostgreSQL; SQLite stores none).
    pub(crate) async fn read_artifact_chunks(
        &self,
        artifact_id: Uuid,
        from: i32,
        limit: i64,
    ) -> Result<Vec<(i32, Vec<u8>)>, sqlx::Error> {
        match self {
            Database::Postgres(PgDb { pool, .. }) => {
                postgres::read_artifact_chunks(pool, artifact_id, from, limit).await
            }
            Database::Sqlite(_) => Ok(Vec::new()),
        }
    }

    pub(crate) async fn get_artifact(
        &self,
        job_id: Uuid,
        name: &str,
    ) -> Result<Option<Artifact>, sqlx::Error> {
        on_pool!(self, p => {
            let row = sqlx::query(concat!(
                "SELECT ",
                artifact_columns!(),
                " FROM artifacts WHERE job_id = $1 AND name = $2"
            ))
            .bind(Id(job_id))
            .bind(name)
            .fetch_optional(p)
            .await?;
            row.map(|row| artifact_from_row!(&row)).transpose()
        })
    }
}
