//! What a process costs, read from Linux's `/proc`: resident memory and CPU time. The
//! benches read it for processes they start (a worker, the watchers' client) and for
//! themselves (`self`), so that a figure is one process's own.

use std::path::Path;

use super::jobs::bench_err;
use crate::cli::error::CliError;

/// Clock ticks per second in `/proc/<pid>/stat`: USER_HZ, 100 on every Linux architecture
/// we build for.
const TICKS_PER_SECOND: f64 = 100.0;

/// Resident memory of a process, from `/proc/<process>/status`: a pid, or `self`.
pub(super) fn rss_kib(process: impl std::fmt::Display) -> Result<u64, CliError> {
    let path = Path::new("/proc").join(process.to_string()).join("status");
    let status = std::fs::read_to_string(&path).map_err(bench_err)?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .ok_or_else(|| bench_err(format!("no VmRSS in {}", path.display())))
}

/// User and system CPU time a process has used, from `/proc/<process>/stat` (after the
/// command name, which may hold spaces: fields 14 and 15 of the whole line). A process that
/// exited but was not yet waited for still answers.
pub(super) fn cpu_seconds(process: impl std::fmt::Display) -> Result<f64, CliError> {
    let path = Path::new("/proc").join(process.to_string()).join("stat");
    let stat = std::fs::read_to_string(&path).map_err(bench_err)?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => Ok((user + system) / TICKS_PER_SECOND),
        _ => Err(bench_err(format!("unreadable {}", path.display()))),
    }
}
