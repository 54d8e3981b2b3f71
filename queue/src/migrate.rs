//! The schema migrations, embedded in the binary so `stepwise` needs no files beside it.
//!
//! Built from `include_str!` rather than sqlx's `migrate!` macro, which would pull the
//! whole sqlx macro crate (and its compile time) in for this one use. A test checks that
//! this list and the files under `migrations/` agree.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

use crate::store::Database;

type Embedded = (i64, &'static str, &'static str);

const SQLITE: &[Embedded] = &[
    (
        1,
        "jobs",
        include_str!("../../migrations/sqlite/0001_jobs.sql"),
    ),
    (
        2,
        "api tokens",
        include_str!("../../migrations/sqlite/0002_api_tokens.sql"),
    ),
    (
        3,
        "lean job writes",
        include_str!("../../migrations/sqlite/0003_lean_job_writes.sql"),
    ),
    (
        4,
        "sessions",
        include_str!("../../migrations/sqlite/0004_sessions.sql"),
    ),
    (
        5,
        "workers",
        include_str!("../../migrations/sqlite/0005_workers.sql"),
    ),
    (
        7,
        "job usage",
        include_str!("../../migrations/sqlite/0007_job_usage.sql"),
    ),
];

const POSTGRES: &[Embedded] = &[
    (
        1,
        "jobs",
        include_str!("../../migrations/postgres/0001_jobs.sql"),
    ),
    (
        2,
        "api tokens",
        include_str!("../../migrations/postgres/0002_api_tokens.sql"),
    ),
    (
        3,
        "lean job writes",
        include_str!("../../migrations/postgres/0003_lean_job_writes.sql"),
    ),
    (
        4,
        "sessions",
        include_str!("../../migrations/postgres/0004_sessions.sql"),
    ),
    (
        5,
        "workers",
        include_str!("../../migrations/postgres/0005_workers.sql"),
    ),
    (
        6,
        "artifact chunks",
        include_str!("../../migrations/postgres/0006_artifact_chunks.sql"),
    ),
    (
        7,
        "job usage",
        include_str!("../../migrations/postgres/0007_job_usage.sql"),
    ),
];

fn migrator(embedded: &[Embedded]) -> Migrator {
    let migrations = embedded
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                false,
            )
        })
        .collect();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// Applies what has not been applied yet; a changed applied migration is an error.
pub(crate) async fn run(db: &Database) -> Result<(), sqlx::migrate::MigrateError> {
    match db {
        Database::Sqlite(db) => migrator(SQLITE).run(&db.pool).await,
        Database::Postgres(pool) => migrator(POSTGRES).run(pool).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(backend: &str) -> Vec<(i64, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../migrations")
            .join(backend);
        let mut found: Vec<(i64, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|entry| {
                let name = entry.unwrap().file_name().into_string().unwrap();
                let stem = name.strip_suffix(".sql")?;
                let version = stem.split('_').next()?.parse().ok()?;
                Some((version, std::fs::read_to_string(dir.join(&name)).unwrap()))
            })
            .collect();
        found.sort();
        found
    }

    #[test]
    fn every_migration_file_is_embedded_in_order() {
        for (backend, embedded) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let embedded: Vec<(i64, String)> = embedded
                .iter()
                .map(|&(v, _, sql)| (v, sql.to_string()))
                .collect();
            assert_eq!(files(backend), embedded, "{backend}");
        }
    }
}
