//! `stepwise bench queue --peer graphile-worker`: the claim + complete phases side by side
//! with graphile-worker on the same PostgreSQL, alternating round by round, so that both
//! columns come from one run on one machine in one mood. graphile-worker runs from
//! `bench/graphile-worker/` (pinned there; `npm ci --prefix bench/graphile-worker` once).
//!
//! Each side drains N no-op jobs queued beforehand (untimed) with W workers, one per call
//! (ours twice: overlapped, then by complete-and-claim) and then batched, and reports jobs/s and the bytes of WAL the server wrote meanwhile per
//! job (server-wide, so both sides count the same way), with the WAL positions between
//! which `pg_waldump --stats` counts its records, and the WAL flushes per job
//! (`pg_stat_wal.wal_sync`, server-wide). A backend reports its flushes when it goes idle,
//! within ten seconds, or when it exits, so each phase is read between two pauses of
//! `--settle-secs` in which nothing runs: what a phase flushed is all in, and nothing
//! else is. The pauses are untimed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use queue::{Queue, ScratchPostgres};
use serde::Deserialize;

use super::drain::{Pace, drain};
use super::queue_args::{BenchArgs, noop_task};
use crate::cli::error::CliError;

/// One throughput phase of one side: jobs, seconds, the WAL written and where.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Phase {
    jobs: usize,
    seconds: f64,
    wal_bytes: i64,
    wal_from: String,
    wal_to: String,
    /// WAL flushes meanwhile, server-wide; read around the phase, not by the peer's script.
    #[serde(default)]
    flushes: i64,
}

impl Phase {
    fn rate(&self) -> f64 {
        self.jobs as f64 / self.seconds
    }
}

/// The figures of every round: ours and the peer's, one per call and batched, and ours
/// one per call by complete-and-claim.
#[derive(Default)]
struct Rounds {
    ours_single: Vec<Phase>,
    ours_finishing: Vec<Phase>,
    ours_batched: Vec<Phase>,
    peer_single: Vec<Phase>,
    peer_batched: Vec<Phase>,
}

pub(super) async fn compare(queue: &Queue, args: &BenchArgs, dir: &Path) -> Result<(), CliError> {
    let script = dir.join("run.mjs");
    if !dir.join("node_modules").join("graphile-worker").is_dir() {
        return Err(CliError::Bench(format!(
            "graphile-worker is not installed in {}: run `npm ci --prefix {}` first",
            dir.display(),
            dir.display()
        )));
    }
    println!(
        "side by side with graphile-worker ({} rounds, alternating; {} jobs, {} workers, batches of {})",
        args.rounds, args.jobs, args.workers, args.batch
    );
    let mut rounds = Rounds::default();
    for round in 1..=args.rounds {
        let single = ours(queue, args, 1, Pace::Overlapped).await?;
        let finishing = ours(queue, args, 1, Pace::Finishing).await?;
        let batched = ours(queue, args, args.batch, Pace::Overlapped).await?;
        let scratch = ScratchPostgres::create(&args.pg_url, "stepwise_bench_peer").await?;
        let peer_single = peer(queue, &script, scratch.url(), "unbatched", args).await;
        let peer_batched = match &peer_single {
            Ok(_) => peer(queue, &script, scratch.url(), "batched", args).await,
            Err(_) => Err(CliError::Bench("skipped".into())),
        };
        scratch.drop_database().await?;
        let (peer_single, peer_batched) = (peer_single?, peer_batched?);
        println!(
            "round {round}: one per call {:>6.0} (complete-and-claim {:>6.0}) vs {:>6.0} jobs/s   batched {:>6.0} vs {:>6.0} jobs/s",
            single.rate(),
            finishing.rate(),
            peer_single.rate(),
            batched.rate(),
            peer_batched.rate()
        );
        println!(
            "  WAL between: stepwise {} {}, {} {}, {} {}; graphile-worker {} {}, {} {}",
            single.wal_from,
            single.wal_to,
            finishing.wal_from,
            finishing.wal_to,
            batched.wal_from,
            batched.wal_to,
            peer_single.wal_from,
            peer_single.wal_to,
            peer_batched.wal_from,
            peer_batched.wal_to
        );
        rounds.ours_single.push(single);
        rounds.ours_finishing.push(finishing);
        rounds.ours_batched.push(batched);
        rounds.peer_single.push(peer_single);
        rounds.peer_batched.push(peer_batched);
    }
    println!();
    println!("| claim + complete | stepwise | graphile-worker | ratio |");
    println!("|---|---|---|---|");
    for (what, ours, theirs) in [
        ("one per call", &rounds.ours_single, &rounds.peer_single),
        (
            "one per call, complete-and-claim",
            &rounds.ours_finishing,
            &rounds.peer_single,
        ),
        ("batched", &rounds.ours_batched, &rounds.peer_batched),
    ] {
        println!(
            "| {what}, jobs/s | {} | {} | {} |",
            range(ours.iter().map(Phase::rate)),
            range(theirs.iter().map(Phase::rate)),
            range(ours.iter().zip(theirs).map(|(a, b)| a.rate() / b.rate())),
        );
        let per_job = |p: &Phase| p.wal_bytes as f64 / p.jobs as f64;
        println!(
            "| {what}, WAL bytes per job | {} | {} | {} |",
            range(ours.iter().map(per_job)),
            range(theirs.iter().map(per_job)),
            range(
                ours.iter()
                    .zip(theirs)
                    .map(|(a, b)| per_job(a) / per_job(b))
            ),
        );
        let flushes = |p: &Phase| p.flushes as f64 / p.jobs as f64;
        println!(
            "| {what}, WAL flushes per job | {} | {} | {} |",
            range(ours.iter().map(flushes)),
            range(theirs.iter().map(flushes)),
            range(
                ours.iter()
                    .zip(theirs)
                    .map(|(a, b)| flushes(a) / flushes(b).max(f64::MIN_POSITIVE))
            ),
        );
    }
    Ok(())
}

/// Queues N jobs (untimed), then drains them `batch` at a time at `pace`. Neither side
/// waits for a completion before it fetches again: graphile-worker's runner does not await
/// `completeJob` before its next fetch, and our loops either overlap the completion with
/// the next claim or take the next job in the completion's own call (`Pace::Finishing`).
async fn ours(queue: &Queue, args: &BenchArgs, batch: u32, pace: Pace) -> Result<Phase, CliError> {
    for i in 0..args.jobs {
        queue.create_job(&noop_task(i), Some("bench")).await?;
    }
    let flushed = settled_flushes(queue, args).await?;
    let (from, wal_from) = wal(queue).await?;
    let started = Instant::now();
    let jobs = drain(queue, args.workers, None, batch, pace).await?;
    let seconds = started.elapsed().as_secs_f64();
    let (to, wal_to) = wal(queue).await?;
    Ok(Phase {
        jobs,
        seconds,
        wal_bytes: to - from,
        wal_from,
        wal_to,
        flushes: settled_flushes(queue, args).await? - flushed,
    })
}

/// The server's WAL flushes so far, once every process has had `--settle-secs` to report.
async fn settled_flushes(queue: &Queue, args: &BenchArgs) -> Result<i64, CliError> {
    tokio::time::sleep(std::time::Duration::from_secs(args.settle_secs)).await;
    queue
        .wal_flushes()
        .await?
        .ok_or_else(|| CliError::Bench("--peer needs --backend postgres".into()))
}

async fn wal(queue: &Queue) -> Result<(i64, String), CliError> {
    queue
        .wal_position()
        .await?
        .ok_or_else(|| CliError::Bench("--peer needs --backend postgres".into()))
}

/// Runs one phase of the peer's script and reads its figures. Its flushes are counted from
/// before the script starts until after it exited, so they include its one `addJobs`.
async fn peer(
    queue: &Queue,
    script: &Path,
    url: &str,
    phase: &str,
    args: &BenchArgs,
) -> Result<Phase, CliError> {
    let flushed = settled_flushes(queue, args).await?;
    let output = tokio::process::Command::new("node")
        .arg(script)
        .arg(libpq_url(url))
        .arg(phase)
        .arg(args.jobs.to_string())
        .arg(args.workers.to_string())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| CliError::Bench(format!("cannot run node {}: {e}", script.display())))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(CliError::Bench(format!(
            "graphile-worker's {phase} phase failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let mut figures: Phase = serde_json::from_str(stdout.trim()).map_err(|e| {
        CliError::Bench(format!(
            "graphile-worker's {phase} phase printed {stdout:?}, not its figures: {e}"
        ))
    })?;
    figures.flushes = settled_flushes(queue, args).await? - flushed;
    Ok(figures)
}

/// `url` for node-postgres, with `sslmode` meaning what it means to libpq, and so to sqlx
/// on our side: node-postgres otherwise reads `prefer` and `require` as `verify-full`, and
/// refuses a server's self-signed certificate that our side accepts.
fn libpq_url(url: &str) -> String {
    if url.contains("uselibpqcompat=") {
        return url.to_string();
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}uselibpqcompat=true")
}

/// `min–max` of the values, or the one value.
fn range(values: impl Iterator<Item = f64>) -> String {
    let values: Vec<f64> = values.collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let shown = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    if values.len() < 2 || shown(min) == shown(max) {
        shown(min)
    } else {
        format!("{}–{}", shown(min), shown(max))
    }
}

/// Where the peer's script lives: `--peer-dir`, else `bench/graphile-worker` under the
/// current directory (the repository root).
pub(super) fn peer_dir(given: Option<&Path>) -> PathBuf {
    given.map_or_else(|| PathBuf::from("bench/graphile-worker"), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::super::queue_args::Peer;
    use super::*;

    /// A small side-by-side run on the test server, graphile-worker included (installed by
    /// `scripts/test.sh`): both columns come out.
    #[tokio::test]
    async fn a_small_side_by_side_run_reports_both_columns() {
        let pg_url = std::env::var("STEPWISE_TEST_PG_URL").unwrap_or_else(|_| {
            "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable".into()
        });
        let scratch = ScratchPostgres::create(&pg_url, "stepwise_t_peer")
            .await
            .unwrap();
        let db = queue::Database::open_url(scratch.url()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(db, queue::QueueConfig::new(dir.path().join("artifacts")))
            .await
            .unwrap();
        queue.migrate().await.unwrap();
        let args = BenchArgs {
            backend: super::super::queue::Backend::Postgres,
            jobs: 30,
            workers: 2,
            producers: 1,
            batch: 4,
            samples: 1,
            pg_url,
            max_running_per_repository: 0,
            peer: Some(Peer::GraphileWorker),
            peer_dir: None,
            rounds: 1,
            settle_secs: 0,
        };
        let peer = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/graphile-worker");
        compare(&queue, &args, &peer).await.unwrap();
        drop(queue);
        scratch.drop_database().await.unwrap();
    }

    #[test]
    fn node_reads_the_ssl_mode_as_libpq_does() {
        assert_eq!(
            libpq_url("postgres://u@h/db?sslmode=prefer"),
            "postgres://u@h/db?sslmode=prefer&uselibpqcompat=true"
        );
        assert_eq!(
            libpq_url("postgres://u@h/db"),
            "postgres://u@h/db?uselibpqcompat=true"
        );
        let given = "postgres://u@h/db?uselibpqcompat=false";
        assert_eq!(libpq_url(given), given);
    }

    #[test]
    fn a_range_shows_one_value_once() {
        assert_eq!(range([2500.4, 2500.2].into_iter()), "2500");
        assert_eq!(range([1.5, 2.25].into_iter()), "1.50–2.25");
        assert_eq!(range([3000.0].into_iter()), "3000");
    }
}
