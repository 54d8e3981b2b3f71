//! The PostgreSQL driver: what PostgreSQL does in one statement where the shared SQL takes
//! several (a create or a claim with its events, a transition written only if its row is
//! unchanged, many rows or events at once), and artifact bytes kept in the database. Each
//! saves round trips, which is what a PostgreSQL write costs. The store's per-concern files
//! call into it; SQLite, whose writes cost no round trip, runs the shared statements.

mod artifacts;
mod claims;
mod events;
mod jobs;

pub(super) use artifacts::{read_artifact_chunks, replace_artifact_chunks};
pub(super) use claims::claim;
pub(super) use events::insert_events;
pub(super) use jobs::{create_job, lock_jobs, save_jobs, write_job_if_unchanged};
