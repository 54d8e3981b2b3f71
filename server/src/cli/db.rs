//! Where the state lives, shared by every command that opens the database (`serve`,
//! `migrate`, `token`).

use std::path::PathBuf;

use clap::Args;

use super::error::CliError;

/// Where the state lives; shared by every command that opens the database.
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Where stepwise keeps its state: the SQLite database and job artifacts.
    #[arg(long, env = "STEPWISE_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// A PostgreSQL URL (postgres://…) to use instead of the embedded SQLite database.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

/// What the queue is told beside where its state lives.
#[derive(Debug, Clone, Default)]
pub struct QueueSettings {
    /// Fills what a submitted task leaves out.
    pub defaults: contract::Defaults,
    /// See [`queue::QueueConfig::max_running_per_repository`].
    pub max_running_per_repository: Option<u32>,
    /// Told of what the queue does: the server's metrics and webhooks.
    pub observers: Vec<std::sync::Arc<dyn queue::Observer>>,
}

/// The queue over the configured database, migrated.
pub async fn open_queue(
    db_args: &DbArgs,
    settings: QueueSettings,
) -> Result<queue::Queue, CliError> {
    let db = match &db_args.database_url {
        Some(url) => queue::Database::open_url(url).await?,
        None => queue::Database::open_data_dir(&db_args.data_dir).await?,
    };
    tracing::info!(backend = db.backend(), data_dir = %db_args.data_dir.display(), "database ready");
    let mut queue_config = queue::QueueConfig::new(db_args.data_dir.join("artifacts"));
    queue_config.defaults = settings.defaults;
    queue_config.max_running_per_repository = settings.max_running_per_repository;
    queue_config.observers = settings.observers;
    let queue = queue::Queue::open(db, queue_config).await?;
    queue.migrate().await?;
    Ok(queue)
}
