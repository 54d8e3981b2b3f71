//! `stepwise migrate`: brings the schema up to date and says so.

use super::db::{DbArgs, QueueSettings, open_queue};
use super::error::CliError;

pub async fn run(db: DbArgs) -> Result<(), CliError> {
    let queue = open_queue(&db, QueueSettings::default()).await?;
    println!("the {} database is up to date", queue.database().backend());
    Ok(())
}
