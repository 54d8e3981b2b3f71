use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

use super::postgres::{Claim, Claimed, Committer, Finish, Finished};
use super::sqlite::SqliteWriter;
use super::{Swap, Swapped};

/// A connection pool to one of the two supported backends.
#[derive(Clone, Debug)]
pub enum Database {
    Sqlite(SqliteDb),
    Postgres(PgDb),
}

/// An SQLite file: a pool for reads, and the one connection every write takes in turn
/// (see `store/sqlite.rs` for why writes do not go through the pool).
#[derive(Clone, Debug)]
pub struct SqliteDb {
    pub(crate) pool: SqlitePool,
    pub(crate) writer: SqliteWriter,
}

impl SqliteDb {
    /// The read pool, for callers that run their own queries (migrations, tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// A PostgreSQL server: the pool, and the lines that concurrent claims, transitions
/// written without a lock, and completions with their worker's next claim wait in to share
/// statements and commits (see `store/postgres/committer.rs`).
#[derive(Clone, Debug)]
pub struct PgDb {
    pub(crate) pool: PgPool,
    pub(crate) swaps: Committer<Swap, Swapped>,
    pub(crate) claims: Committer<Claim, Claimed>,
    pub(crate) finishes: Committer<Finish, Finished>,
}

impl PgDb {
    fn new(pool: PgPool, lines: PgPool) -> Self {
        let swaps = super::postgres::swap_committer(lines.clone());
        let claims = super::postgres::claim_committer(lines.clone());
        let finishes = super::postgres::finish_committer(lines);
        PgDb {
            pool,
            swaps,
            claims,
            finishes,
        }
    }

    /// The pool, for callers that run their own queries (migrations, tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the database {target}: {source}")]
    Connect { target: String, source: sqlx::Error },
    #[error("cannot open the write connection of {target}: {source}")]
    ConnectWriter {
        target: String,
        source: rusqlite::Error,
    },
    #[error("unsupported DATABASE_URL scheme in {0:?}: use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
}

/// The file name of the embedded database inside the data directory.
pub const SQLITE_FILE: &str = "stepwise.db";

impl Database {
    /// Opens (creating if needed) the embedded SQLite database under `data_dir`.
    pub async fn open_data_dir(data_dir: &Path) -> Result<Self, DatabaseError> {
        std::fs::create_dir_all(data_dir).map_err(|source| DatabaseError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        Self::open_sqlite(&data_dir.join(SQLITE_FILE)).await
    }

    /// Opens the database named by a URL: `sqlite://…` or `postgres://…`.
    pub async fn open_url(url: &str) -> Result<Self, DatabaseError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let connect_error = |source| DatabaseError::Connect {
                target: redact_url(url),
                source,
            };
            let pool = pg_pool_options(16, MAIN_SETTINGS)
                .connect(url)
                .await
                .map_err(connect_error)?;
            // The committers' own connections, one per statement their three lines (swaps,
            // claims, finishes) may run at once.
            let lines = pg_pool_options(3 * super::postgres::IN_FLIGHT as u32, COMMITTER_SETTINGS)
                .connect_lazy(url)
                .map_err(connect_error)?;
            Ok(Database::Postgres(PgDb::new(pool, lines)))
        } else if let Some(path) = url.strip_prefix("sqlite://") {
            Self::open_sqlite(Path::new(path)).await
        } else {
            Err(DatabaseError::UnsupportedUrl(redact_url(url)))
        }
    }

    async fn open_sqlite(path: &Path) -> Result<Self, DatabaseError> {
        let target = path.display().to_string();
        let busy_timeout = Duration::from_secs(5);
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|source| DatabaseError::Connect {
                target: target.clone(),
                source,
            })?
            .filename(path)
            .create_if_missing(true)
            // WAL lets readers (the dashboard, SSE) run beside the single writer.
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(busy_timeout)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // An in-process file cannot hang up; the ping would only cost a thread hop.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(|source| DatabaseError::Connect {
                target: target.clone(),
                source,
            })?;
        // Opened after the pool, which created the file and switched it to WAL.
        let writer = SqliteWriter::open(path, busy_timeout)
            .map_err(|source| DatabaseError::ConnectWriter { target, source })?;
        Ok(Database::Sqlite(SqliteDb { pool, writer }))
    }

    /// The backend's name, for logs.
    pub fn backend(&self) -> &'static str {
        match self {
            Database::Sqlite(_) => "sqlite",
            Database::Postgres(_) => "postgres",
        }
    }

    /// Round-trips one query: proves the pool is alive.
    pub async fn ping(&self) -> Result<(), sqlx::Error> {
        match self {
            Database::Sqlite(db) => sqlx::query("SELECT 1").execute(&db.pool).await.map(drop),
            Database::Postgres(db) => sqlx::query("SELECT 1").execute(&db.pool).await.map(drop),
        }
    }

    /// The journal mode SQLite reports; `None` on PostgreSQL.
    pub async fn sqlite_journal_mode(&self) -> Result<Option<String>, sqlx::Error> {
        match self {
            Database::Sqlite(db) => {
                let mode: (String,) = sqlx::query_as("PRAGMA journal_mode")
                    .fetch_one(&db.pool)
                    .await?;
                Ok(Some(mode.0))
            }
            Database::Postgres(_) => Ok(None),
        }
    }
}

/// What every connection of the queue's main pool sets. Every statement of the queue is
/// written to walk an index in the order it wants, and none needs a sort. With statistics
/// that lag a burst of jobs into a fresh table (autovacuum analyzes a minute later), the
/// planner was measured choosing a bitmap scan plus a sort of every queued job for each
/// claim: 3.8 ms at 5,000 queued instead of 0.2 ms walking jobs_claim_order. Discouraging
/// sorts on the queue's own connections keeps the index plan whatever the statistics say.
/// JIT off: it compiles any plan whose cost passes a threshold, which a discouraged sort
/// does at once, and for statements that run in a fraction of a millisecond compiling
/// costs more than it could ever save.
const MAIN_SETTINGS: &str = "SET enable_sort = off; SET jit = off";

/// The committers' connections also always use a prepared statement's generic plan. Their
/// statements take arrays, and PostgreSQL plans a statement again for every call while a
/// plan for the arrays' actual lengths looks cheaper than the generic one, which for an
/// array of one row it always does: the batched swap was measured planning on every call,
/// 0.28 ms, longer than it then ran.
const COMMITTER_SETTINGS: &str =
    "SET enable_sort = off; SET jit = off; SET plan_cache_mode = force_generic_plan";

fn pg_pool_options(max_connections: u32, settings: &'static str) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        // sqlx pings every connection it hands out by default: one more round trip before
        // each statement, measured at a third of a single claim's time. A connection that
        // died while idle fails its next statement instead, sqlx drops it, and the caller's
        // next try gets a fresh one.
        .test_before_acquire(false)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                sqlx::Executor::execute(conn, settings).await?;
                Ok(())
            })
        })
}

/// Hides the password of a database URL before it reaches a log or an error.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:[REDACTED]@{host}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn data_dir_database_is_a_real_file_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_data_dir(&dir.path().join("nested"))
            .await
            .unwrap();
        db.ping().await.unwrap();
        assert_eq!(db.backend(), "sqlite");
        assert_eq!(
            db.sqlite_journal_mode().await.unwrap().as_deref(),
            Some("wal")
        );
        assert!(dir.path().join("nested").join(SQLITE_FILE).is_file());
    }

    #[test]
    fn database_url_password_is_redacted() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db:5432/stepwise"),
            "postgres://app:[REDACTED]@db:5432/stepwise"
        );
        assert_eq!(redact_url("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
    }

    #[tokio::test]
    async fn unknown_url_scheme_is_refused_with_a_hint() {
        let err = Database::open_url("mysql://root:pw@localhost/x")
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("sqlite://PATH or postgres://"), "{text}");
        assert!(!text.contains("pw@"), "{text}");
    }
}
