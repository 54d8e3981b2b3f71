//! `stepwise bench`: figures for the queue, the worker and how costs grow with the work,
//! printed, never asserted. Built only with the `bench` feature, so the release binary does
//! not carry it.

mod concurrent;
mod drain;
mod jobs;
mod peer;
mod procfs;
pub mod queue;
mod queue_args;
pub mod sandbox;
pub mod scale;
pub mod watch_client;
mod watchers;
pub mod worker;

use crate::cli::error::CliError;

/// The `stepwise` binary a bench starts as a process of its own (a worker, the watchers'
/// client): the one given, or this one.
fn binary_or_this(given: Option<&std::path::Path>) -> Result<std::path::PathBuf, CliError> {
    match given {
        Some(binary) => Ok(binary.to_path_buf()),
        None => std::env::current_exe().map_err(|e| CliError::Bench(e.to_string())),
    }
}

/// The `stepwise` binary cargo builds beside this crate's tests (its `tests/` need it),
/// with the features of the test build, `bench` among them: the benches' unit tests start
/// it as the processes they measure.
#[cfg(test)]
fn built_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let binary = exe
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("stepwise");
    assert!(
        binary.exists(),
        "{} is not built: run `cargo test -p stepwise`",
        binary.display()
    );
    binary
}
