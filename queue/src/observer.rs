//! What a replica's queue tells an observer (the server's metrics) of the writes it made:
//! each event it stored, with the job as that write left it. Only this replica's writes,
//! so replicas on one database never count one change twice.

use contract::Job;
use serde_json::{Map, Value};

/// Told of every event this replica's queue stored, once its write has committed. Called
/// inline on the writing task: it must be quick and must never block.
pub trait Observer: Send + Sync + std::fmt::Debug {
    fn recorded(&self, job: &Job, kind: &str, payload: &Map<String, Value>);
}
