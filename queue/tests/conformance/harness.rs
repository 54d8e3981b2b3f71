//! One fresh queue per test, on either backend, with a manual clock.
//!
//! PostgreSQL: each test creates its own database `stepwise_t_<unix secs>_<hex>` through
//! the admin URL in `STEPWISE_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`)
//! and drops it when the harness is dropped, on failure too (Drop runs while a panic
//! unwinds). Databases left by killed runs are dropped by the first test of a later run
//! once they are an hour old; the creation time is in the name for that.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use contract::{Job, JobState};
use queue::{ClaimRequest, Database, Fence, ManualClock, Queue, QueueConfig, QueueError};
use serde_json::{Value, json};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use tempfile::TempDir;
use tokio::sync::OnceCell;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const LEASE: Duration = Duration::from_secs(30);

/// Every capability a job in these tests may require.
pub const ALL_CAPS: [&str; 5] = ["codex", "claude", "git", "gh", "docker"];

/// Runs one conformance case on a fresh harness.
pub async fn run<F, Fut>(backend: Backend, case: F)
where
    F: FnOnce(Harness) -> Fut,
    Fut: Future<Output = ()>,
{
    case(Harness::new(backend).await).await;
}

pub struct Harness {
    pub backend: Backend,
    pub queue: Queue,
    pub clock: ManualClock,
    pub artifacts: TempDir,
    db: Database,
    // Dropped last: the database must outlive the pools above.
    _sqlite_dir: Option<TempDir>,
    _pg: Option<PgTestDb>,
}

pub fn start_time() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

impl Harness {
    pub async fn new(backend: Backend) -> Harness {
        let clock = ManualClock::new(start_time());
        let artifacts = tempfile::tempdir().unwrap();
        let (db, sqlite_dir, pg) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let db = Database::open_data_dir(dir.path()).await.unwrap();
                (db, Some(dir), None)
            }
            Backend::Postgres => {
                let pg = PgTestDb::create().await;
                let db = Database::open_url(&pg.url)
                    .await
                    .unwrap_or_else(|e| panic!("cannot open the test database {}: {e}", pg.name));
                (db, None, Some(pg))
            }
        };
        let harness = Harness {
            backend,
            queue: open(&db, config(&clock, &artifacts)).await,
            clock,
            artifacts,
            db,
            _sqlite_dir: sqlite_dir,
            _pg: pg,
        };
        harness.queue.migrate().await.unwrap();
        harness
    }

    /// Another queue on the same database and clock, configured by `tweak`: a second
    /// replica, or the same one with other limits.
    pub async fn queue_with(&self, tweak: impl FnOnce(&mut QueueConfig)) -> Queue {
        let mut config = config(&self.clock, &self.artifacts);
        tweak(&mut config);
        open(&self.db, config).await
    }

    pub async fn create(&self, spec: Spec) -> Job {
        self.queue
            .create_job(&spec.json(), Some("alice"))
            .await
            .unwrap()
    }

    pub async fn claim(&self, worker: &str) -> Option<Job> {
        self.queue.claim(&request(worker)).await.unwrap()
    }

    /// Claims, insisting that it is `expected` that comes out.
    pub async fn claim_exactly(&self, worker: &str, expected: &Job) -> Job {
        let job = self.claim(worker).await.expect("a claimable job");
        assert_eq!(job.id, expected.id);
        job
    }

    pub async fn get(&self, job: &Job) -> Job {
        self.queue.get_job(&job.id).await.unwrap()
    }

    pub async fn event_kinds(&self, job: &Job) -> Vec<String> {
        self.queue
            .list_events(&job.id, 0, 1000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }

    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// The one number `sql` answers, read behind the queue's back.
    pub async fn count(&self, sql: &str) -> i64 {
        match &self.db {
            Database::Sqlite(db) => sqlx::query_scalar(sql).fetch_one(db.pool()).await,
            Database::Postgres(db) => sqlx::query_scalar(sql).fetch_one(db.pool()).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// PostgreSQL's pool, for a case that holds a transaction of its own open while the
    /// queue writes; `None` on SQLite, whose one writer lets no two writes interleave.
    pub fn postgres_pool(&self) -> Option<sqlx::PgPool> {
        match &self.db {
            Database::Postgres(db) => Some(db.pool().clone()),
            Database::Sqlite(_) => None,
        }
    }

    /// Runs `sql` on the database behind the queue's back, as an operator's hand would.
    pub async fn execute(&self, sql: &str) {
        match &self.db {
            Database::Sqlite(db) => sqlx::query(sql).execute(db.pool()).await.map(drop),
            Database::Postgres(db) => sqlx::query(sql).execute(db.pool()).await.map(drop),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

fn config(clock: &ManualClock, artifacts: &TempDir) -> QueueConfig {
    let mut config = QueueConfig::new(artifacts.path());
    config.clock = Arc::new(clock.clone());
    config
}

async fn open(db: &Database, config: QueueConfig) -> Queue {
    Queue::open(db.clone(), config).await.unwrap()
}

pub fn request(worker: &str) -> ClaimRequest {
    ClaimRequest {
        worker_id: worker.to_string(),
        capabilities: ALL_CAPS.iter().map(|c| c.to_string()).collect(),
        allowed_types: None,
        allowed_repositories: None,
        lease: LEASE,
        max_running_per_repository: None,
    }
}

pub fn fence(job: &Job) -> Fence {
    Fence::of(job).expect("a claimed job")
}

/// A job-create request: publish mode `none`, so it requires exactly `codex` and `git`
/// plus `extra_caps`.
#[derive(Debug, Clone)]
pub struct Spec {
    pub repository: String,
    pub priority: i32,
    pub max_attempts: u32,
    pub extra_caps: Vec<String>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            repository: "octo/repo".into(),
            priority: 0,
            max_attempts: 3,
            extra_caps: Vec::new(),
        }
    }
}

impl Spec {
    pub fn priority(priority: i32) -> Self {
        Spec {
            priority,
            ..Spec::default()
        }
    }

    pub fn attempts(max_attempts: u32) -> Self {
        Spec {
            max_attempts,
            ..Spec::default()
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "type": "task",
            "priority": self.priority,
            "maxAttempts": self.max_attempts,
            "payload": {
                "repository": self.repository,
                "requiredCapabilities": self.extra_caps,
                "task": {
                    "instructions": "Fix the flaky test.",
                    "publish": { "mode": "none" }
                }
            }
        })
    }
}

/// Asserts the error's API code, printing the error when it is another.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(result: Result<T, QueueError>, code: &str) -> QueueError {
    match result {
        Ok(value) => panic!("expected {code}, got Ok({value:?})"),
        Err(err) => {
            assert_eq!(err.code().as_str(), code, "{err}");
            err
        }
    }
}

#[track_caller]
pub fn assert_conflict<T: std::fmt::Debug>(result: Result<T, QueueError>, state: JobState) {
    match assert_code(result, "job_state_conflict") {
        QueueError::StateConflict { current, .. } => assert_eq!(current, state),
        other => panic!("expected a state conflict, got {other}"),
    }
}

const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

fn admin_url() -> String {
    std::env::var("STEPWISE_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_string())
}

async fn admin_connection() -> PgConnection {
    let url = admin_url();
    match PgConnection::connect(&url).await {
        Ok(conn) => conn,
        Err(e) => panic!(
            "PostgreSQL is not reachable at {url} ({e}). The PostgreSQL conformance tests need \
             it: start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) \
             main start`, or point STEPWISE_TEST_PG_URL at an admin URL of another server."
        ),
    }
}

static SWEPT: OnceCell<()> = OnceCell::const_new();

/// Drops test databases that killed runs left behind, once they are an hour old (younger
/// ones may belong to a run going on beside this one).
async fn sweep_leftovers(conn: &mut PgConnection) {
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'stepwise_t_%'")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    let hour_ago = Utc::now().timestamp() - 3600;
    for name in names {
        let created = name
            .strip_prefix("stepwise_t_")
            .and_then(|rest| rest.split('_').next())
            .and_then(|secs| secs.parse::<i64>().ok());
        if created.is_some_and(|secs| secs < hour_ago) {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .execute(&mut *conn)
                .await;
        }
    }
}

struct PgTestDb {
    name: String,
    url: String,
}

impl PgTestDb {
    async fn create() -> PgTestDb {
        let mut conn = admin_connection().await;
        SWEPT.get_or_init(|| sweep_leftovers(&mut conn)).await;
        let name = format!(
            "stepwise_t_{}_{}",
            Utc::now().timestamp(),
            uuid::Uuid::now_v7().simple()
        );
        sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut conn)
            .await
            .unwrap();
        let options = PgConnectOptions::from_str(&admin_url())
            .unwrap()
            .database(&name);
        let url = options.to_url_lossy().to_string();
        PgTestDb { name, url }
    }
}

impl Drop for PgTestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop may run inside the test's runtime, which cannot be blocked on; a thread with
        // its own small runtime can.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&admin_url()).await.ok()?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .execute(&mut conn)
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(_))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}

pub fn step_event(kind: &str) -> contract::NewEvent {
    contract::NewEvent {
        kind: kind.to_string(),
        level: contract::EventLevel::Info,
        message: format!("{kind} happened"),
        payload: serde_json::Map::new(),
    }
}
