//! Throw-away PostgreSQL databases, for benchmarks and tests that need a real server but
//! must leave it as they found it.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

use crate::store::DatabaseError;

/// A database created on a server for one run; [`ScratchPostgres::drop_database`] removes it.
#[derive(Debug)]
pub struct ScratchPostgres {
    admin_url: String,
    name: String,
    url: String,
}

impl ScratchPostgres {
    /// Creates `{prefix}_{unique}` on the server of `admin_url` (a URL whose user may
    /// create databases).
    pub async fn create(admin_url: &str, prefix: &str) -> Result<Self, DatabaseError> {
        let connect_error = |source| DatabaseError::Connect {
            target: "the PostgreSQL admin URL".into(),
            source,
        };
        let name = format!("{prefix}_{}", uuid::Uuid::now_v7().simple());
        let mut conn = PgConnection::connect(admin_url)
            .await
            .map_err(connect_error)?;
        sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut conn)
            .await
            .map_err(connect_error)?;
        let options = PgConnectOptions::from_str(admin_url)
            .map_err(connect_error)?
            .database(&name);
        Ok(ScratchPostgres {
            admin_url: admin_url.to_string(),
            url: options.to_url_lossy().to_string(),
            name,
        })
    }

    /// The URL of the scratch database (it holds the admin URL's credentials: don't print it).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Drops the database, disconnecting whoever is still on it.
    pub async fn drop_database(self) -> Result<(), DatabaseError> {
        let connect_error = |source| DatabaseError::Connect {
            target: "the PostgreSQL admin URL".into(),
            source,
        };
        let mut conn = PgConnection::connect(&self.admin_url)
            .await
            .map_err(connect_error)?;
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        ))
        .execute(&mut conn)
        .await
        .map_err(connect_error)?;
        Ok(())
    }
}
