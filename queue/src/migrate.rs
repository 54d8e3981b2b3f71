//! The schema migrations, embedded in the binary so `stepwise` needs no files beside it.
//!
//! Built from `include_str!` rather than sqlx's `migrate!` macro, which would pull the
//! whole sqlx macro crate (and its compile time) in for this one use. A test checks that
//! this list and the files under `migrations/` agree.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

use crate::store::{Database, PgDb};

type Embedded = (i64, &'static str, &'static str);

/// A migration: its version, what it does, and its file under `migrations/<backend>/`.
macro_rules! embedded {
    ($backend:literal, $version:literal, $what:literal, $file:literal) => {
        (
            $version,
            $what,
            include_str!(concat!("../../migrations/", $backend, "/", $file)),
        )
    };
}

const SQLITE: &[Embedded] = &[
    embedded!("sqlite", 1, "jobs", "0001_jobs.sql"),
    embedded!("sqlite", 2, "api tokens", "0002_api_tokens.sql"),
    embedded!("sqlite", 3, "lean job writes", "0003_lean_job_writes.sql"),
    embedded!("sqlite", 4, "sessions", "0004_sessions.sql"),
    embedded!("sqlite", 5, "workers", "0005_workers.sql"),
    embedded!("sqlite", 7, "job usage", "0007_job_usage.sql"),
    embedded!("sqlite", 8, "pause and resume", "0008_pause_and_resume.sql"),
    embedded!(
        "sqlite",
        9,
        "running by repository",
        "0009_running_by_repository.sql"
    ),
    embedded!("sqlite", 10, "retention", "0010_retention.sql"),
    embedded!("sqlite", 14, "worker sandbox", "0014_worker_sandbox.sql"),
    embedded!("sqlite", 15, "webhook outbox", "0015_webhook_outbox.sql"),
    embedded!(
        "sqlite",
        16,
        "budget notifications",
        "0016_budget_notifications.sql"
    ),
    embedded!(
        "sqlite",
        17,
        "pull request watches",
        "0017_pull_request_watches.sql"
    ),
    embedded!("sqlite", 18, "github source", "0018_github_source.sql"),
    embedded!("sqlite", 19, "schedules", "0019_schedules.sql"),
    embedded!(
        "sqlite",
        20,
        "job dependencies",
        "0020_job_dependencies.sql"
    ),
    embedded!(
        "sqlite",
        21,
        "success in the row",
        "0021_success_in_the_row.sql"
    ),
    embedded!(
        "sqlite",
        22,
        "claim in the row",
        "0022_claim_in_the_row.sql"
    ),
    embedded!(
        "sqlite",
        23,
        "status listed apart",
        "0023_status_listed_apart.sql"
    ),
    embedded!("sqlite", 24, "retention walks", "0024_retention_walks.sql"),
    embedded!("sqlite", 25, "live jobs", "0025_live_jobs.sql"),
    embedded!(
        "sqlite",
        26,
        "success triggers",
        "0026_success_triggers.sql"
    ),
];

const POSTGRES: &[Embedded] = &[
    embedded!("postgres", 1, "jobs", "0001_jobs.sql"),
    embedded!("postgres", 2, "api tokens", "0002_api_tokens.sql"),
    embedded!("postgres", 3, "lean job writes", "0003_lean_job_writes.sql"),
    embedded!("postgres", 4, "sessions", "0004_sessions.sql"),
    embedded!("postgres", 5, "workers", "0005_workers.sql"),
    embedded!("postgres", 6, "artifact chunks", "0006_artifact_chunks.sql"),
    embedded!("postgres", 7, "job usage", "0007_job_usage.sql"),
    embedded!(
        "postgres",
        8,
        "pause and resume",
        "0008_pause_and_resume.sql"
    ),
    embedded!(
        "postgres",
        9,
        "running by repository",
        "0009_running_by_repository.sql"
    ),
    embedded!("postgres", 10, "retention", "0010_retention.sql"),
    embedded!(
        "postgres",
        11,
        "lighter transitions",
        "0011_lighter_transitions.sql"
    ),
    embedded!(
        "postgres",
        12,
        "cheaper statements",
        "0012_cheaper_statements.sql"
    ),
    embedded!(
        "postgres",
        13,
        "updates on the page",
        "0013_updates_on_the_page.sql"
    ),
    embedded!("postgres", 14, "worker sandbox", "0014_worker_sandbox.sql"),
    embedded!("postgres", 15, "webhook outbox", "0015_webhook_outbox.sql"),
    embedded!(
        "postgres",
        16,
        "budget notifications",
        "0016_budget_notifications.sql"
    ),
    embedded!(
        "postgres",
        17,
        "pull request watches",
        "0017_pull_request_watches.sql"
    ),
    embedded!("postgres", 18, "github source", "0018_github_source.sql"),
    embedded!("postgres", 19, "schedules", "0019_schedules.sql"),
    embedded!(
        "postgres",
        20,
        "job dependencies",
        "0020_job_dependencies.sql"
    ),
    embedded!(
        "postgres",
        21,
        "success in the row",
        "0021_success_in_the_row.sql"
    ),
    embedded!(
        "postgres",
        22,
        "claim in the row",
        "0022_claim_in_the_row.sql"
    ),
    embedded!(
        "postgres",
        23,
        "status listed apart",
        "0023_status_listed_apart.sql"
    ),
    embedded!(
        "postgres",
        24,
        "retention walks",
        "0024_retention_walks.sql"
    ),
    embedded!("postgres", 25, "live jobs", "0025_live_jobs.sql"),
    embedded!(
        "postgres",
        26,
        "success triggers",
        "0026_success_triggers.sql"
    ),
    embedded!(
        "postgres",
        27,
        "successes told by their statement",
        "0027_successes_told_by_their_statement.sql"
    ),
    embedded!(
        "postgres",
        28,
        "room for a batch",
        "0028_room_for_a_batch.sql"
    ),
    embedded!(
        "postgres",
        29,
        "room for a claim",
        "0029_room_for_a_claim.sql"
    ),
    embedded!("postgres", 30, "running by id", "0030_running_by_id.sql"),
    embedded!("postgres", 31, "swap conflict", "0031_swap_conflict.sql"),
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
        Database::Sqlite(db) => run_sqlite(&db.pool, SQLITE).await,
        Database::Postgres(PgDb { pool, .. }) => migrator(POSTGRES).run(pool).await,
    }
}

/// Applies the migrations before `version` only: for a test of what one does to the data
/// of the schema before it.
#[cfg(test)]
pub(crate) async fn run_before(db: &Database, version: i64) {
    let before =
        |all: &'static [Embedded]| &all[..all.iter().position(|m| m.0 == version).unwrap()];
    match db {
        Database::Sqlite(db) => run_sqlite(&db.pool, before(SQLITE)).await.unwrap(),
        Database::Postgres(PgDb { pool, .. }) => {
            migrator(before(POSTGRES)).run(pool).await.unwrap()
        }
    }
}

/// Why the database cannot serve this build, when it cannot: a readiness probe's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// No answer, or an error: the cause is logged, never shown to an unauthenticated probe.
    #[error("the database does not answer: the server's log says why")]
    Unreachable,
    #[error(
        "the database has no stepwise schema: run `stepwise migrate`, or start `stepwise serve`, which applies it"
    )]
    NoSchema,
    #[error(
        "migration {version} ({description}) is not applied: run `stepwise migrate`, or restart `stepwise serve`, which applies it"
    )]
    Behind {
        version: i64,
        description: &'static str,
    },
    #[error(
        "migration {version} is marked failed: fix the database by hand as its error said, then run `stepwise migrate`"
    )]
    Failed { version: i64 },
    #[error(
        "the database's schema is at migration {applied}, newer than this build knows ({known}): upgrade this replica"
    )]
    Ahead { applied: i64, known: i64 },
}

/// Whether the database answers and holds exactly the schema this build applies.
pub(crate) async fn readiness(db: &Database) -> Result<(), NotReady> {
    const QUERY: &str = "SELECT version, success FROM _sqlx_migrations ORDER BY version";
    let (applied, embedded) = match db {
        Database::Sqlite(db) => (sqlx::query_as(QUERY).fetch_all(&db.pool).await, SQLITE),
        Database::Postgres(PgDb { pool, .. }) => {
            (sqlx::query_as(QUERY).fetch_all(pool).await, POSTGRES)
        }
    };
    match applied {
        Ok(applied) => compare(&applied, embedded),
        // The database answered, with an error: the table is not there.
        Err(error @ sqlx::Error::Database(_)) => {
            tracing::warn!(%error, "readiness: the migrations table cannot be read");
            Err(NotReady::NoSchema)
        }
        Err(error) => {
            tracing::warn!(%error, "readiness: the database does not answer");
            Err(NotReady::Unreachable)
        }
    }
}

/// `applied` (version, success), in order, against what this build embeds.
fn compare(applied: &[(i64, bool)], embedded: &[Embedded]) -> Result<(), NotReady> {
    if let Some(&(version, _)) = applied.iter().find(|(_, success)| !success) {
        return Err(NotReady::Failed { version });
    }
    if applied.is_empty() {
        return Err(NotReady::NoSchema);
    }
    if let Some(&(version, description, _)) = embedded
        .iter()
        .find(|(v, _, _)| !applied.iter().any(|(a, _)| a == v))
    {
        return Err(NotReady::Behind {
            version,
            description,
        });
    }
    let known = embedded.last().map_or(0, |m| m.0);
    match applied.last() {
        Some(&(applied, _)) if applied > known => Err(NotReady::Ahead { applied, known }),
        _ => Ok(()),
    }
}

/// A table rebuilt (0008) must not cascade its drop into the tables that refer to it, and
/// foreign keys cannot be turned off inside the transaction each migration runs in: so
/// SQLite's migrations run on a connection that has them off, back on after.
async fn run_sqlite(
    pool: &sqlx::SqlitePool,
    embedded: &[Embedded],
) -> Result<(), sqlx::migrate::MigrateError> {
    let mut conn = pool.acquire().await?;
    sqlx::query("PRAGMA foreign_keys = OFF")
        .execute(&mut *conn)
        .await?;
    let ran = migrator(embedded).run(&mut *conn).await;
    let restored = sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut *conn)
        .await;
    ran?;
    restored?;
    Ok(())
}

#[cfg(test)]
mod tests;
