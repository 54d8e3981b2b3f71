//! `stepwise bench queue`: figures for the queue on either backend, printed, never asserted
//! (on a shared 2-core machine a timed assert is a coin toss).
//!
//! 1. enqueue: N no-op tasks through `create_job` (normalization included), sequentially;
//! 2. claim + complete: W workers drain them through the service;
//! 3. batched: P producers enqueue N more, then W workers claim and complete them B at a
//!    time ([`Queue::claim_many`], [`Queue::complete_many`]);
//! 4. end to end: P producers enqueue N more between them while W workers claim and
//!    complete them one at a time;
//! 5. the same with the workers claiming and completing B at a time (producers still
//!    submit one task per call, as clients do);
//! 6. enqueue → claim latency: one idle worker long-polls over real HTTP; each job is
//!    created in-process and timed until the worker's claim answer arrives.

use std::time::{Duration, Instant};

use queue::{Database, Queue, QueueConfig, ScratchPostgres, TokenKind};

use super::drain::{CAPABILITIES, Pace, drain};
use super::queue_args::Peer;
pub use super::queue_args::{Backend, BenchArgs};
use super::queue_args::{REPOSITORIES, noop_task};
use crate::cli::error::CliError;
use crate::http::auth::{Scope, mint};
use crate::http::{AppState, Limits, api};

pub async fn run(args: BenchArgs) -> Result<(), CliError> {
    if args.jobs == 0
        || args.workers == 0
        || args.producers == 0
        || args.samples == 0
        || args.rounds == 0
    {
        return Err(CliError::Usage(
            "--jobs, --workers, --producers, --samples and --rounds must be at least 1".into(),
        ));
    }
    if args.peer.is_some() && args.backend != Backend::Postgres {
        return Err(CliError::Usage(
            "--peer compares on PostgreSQL: add --backend postgres".into(),
        ));
    }
    if !(1..=queue::MAX_CLAIM_BATCH).contains(&args.batch) {
        return Err(CliError::Usage(format!(
            "--batch must be between 1 and {}",
            queue::MAX_CLAIM_BATCH
        )));
    }
    let (db, scratch, dir) = match args.backend {
        Backend::Sqlite => {
            // One folder per run, also for runs at once in one process (the tests').
            static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("stepwise-bench-{}-{run}", std::process::id()));
            (Database::open_data_dir(&dir).await?, None, Some(dir))
        }
        Backend::Postgres => {
            let scratch = ScratchPostgres::create(&args.pg_url, "stepwise_bench").await?;
            (
                Database::open_url(scratch.url()).await?,
                Some(scratch),
                None,
            )
        }
    };
    let artifacts = dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join("bench-artifacts");
    let mut config = QueueConfig::new(artifacts);
    config.max_running_per_repository =
        (args.max_running_per_repository > 0).then_some(args.max_running_per_repository);
    let queue = Queue::open(db, config).await?;
    queue.migrate().await?;
    // As `stepwise serve` runs it: what a claim walks depends on it (`queue::Vacuum`).
    let stop = tokio_util::sync::CancellationToken::new();
    let vacuum =
        queue::Vacuum::new(queue.clone(), queue::VacuumConfig::default()).start(stop.clone());
    let outcome = match args.peer {
        Some(Peer::GraphileWorker) => {
            let dir = super::peer::peer_dir(args.peer_dir.as_deref());
            super::peer::compare(&queue, &args, &dir).await
        }
        None => measure(&queue, &args).await,
    };
    if let Some(dir) = &dir {
        // The log is bounded by the checkpointer, not by the database's size: worth seeing.
        let mib = |name: &str| {
            std::fs::metadata(dir.join(name)).map_or(0.0, |m| m.len() as f64 / 1048576.0)
        };
        println!(
            "sqlite files at the end: database {:.1} MiB, write-ahead log {:.1} MiB",
            mib(queue::SQLITE_FILE),
            mib(&format!("{}-wal", queue::SQLITE_FILE))
        );
    }
    stop.cancel();
    let _ = vacuum.await;
    drop(queue);
    if let Some(scratch) = scratch {
        scratch.drop_database().await?;
    }
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    outcome
}

async fn measure(queue: &Queue, args: &BenchArgs) -> Result<(), CliError> {
    let durability = match args.backend {
        Backend::Sqlite => "sqlite (WAL, synchronous=NORMAL)",
        Backend::Postgres => "postgres (server defaults)",
    };
    let limit = match args.max_running_per_repository {
        0 => "none".to_string(),
        n => format!("{n} running per repository ({REPOSITORIES} repositories)"),
    };
    println!(
        "backend: {durability}   jobs: {}   workers: {}   latency samples: {}   limit: {limit}",
        args.jobs, args.workers, args.samples
    );

    let started = Instant::now();
    for i in 0..args.jobs {
        queue.create_job(&noop_task(i), Some("bench")).await?;
    }
    report("enqueue (sequential)", args.jobs, started.elapsed());

    let written = Written::start(queue).await?;
    let started = Instant::now();
    let done = drain(queue, args.workers, None, 1, Pace::Sequential).await?;
    report(
        &format!("claim + complete ({} workers)", args.workers),
        done,
        started.elapsed(),
    );
    written.report(queue, done).await?;

    let started = Instant::now();
    for producer in produce(queue, args.producers, args.jobs) {
        producer
            .await
            .map_err(|e| CliError::Bench(format!("a producer task failed: {e}")))??;
    }
    report(
        &format!("enqueue ({} producers)", args.producers),
        args.jobs,
        started.elapsed(),
    );

    let written = Written::start(queue).await?;
    let started = Instant::now();
    let done = drain(queue, args.workers, None, args.batch, Pace::Sequential).await?;
    report(
        &format!(
            "claim + complete, batched ({} workers, {} per batch)",
            args.workers, args.batch
        ),
        done,
        started.elapsed(),
    );
    written.report(queue, done).await?;

    end_to_end(
        queue,
        args,
        1,
        &format!(
            "end to end: enqueue → claim → complete ({}p, {}w)",
            args.producers, args.workers
        ),
    )
    .await?;
    end_to_end(
        queue,
        args,
        args.batch,
        &format!(
            "end to end, workers batched ({}p, {}w, {} per batch)",
            args.producers, args.workers, args.batch
        ),
    )
    .await?;

    let latencies = claim_latency(queue, args.samples).await?;
    println!(
        "enqueue → claim over HTTP long-poll ({} samples): p50 {:.2} ms   p99 {:.2} ms   max {:.2} ms",
        latencies.len(),
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        latencies.last().copied().unwrap_or_default(),
    );
    Ok(())
}

/// P producers enqueue N jobs while W workers claim and complete them, `batch` at a time.
async fn end_to_end(
    queue: &Queue,
    args: &BenchArgs,
    batch: u32,
    what: &str,
) -> Result<(), CliError> {
    let started = Instant::now();
    let producers = produce(queue, args.producers, args.jobs);
    let done = drain(
        queue,
        args.workers,
        Some(args.jobs),
        batch,
        Pace::Sequential,
    )
    .await?;
    for producer in producers {
        producer
            .await
            .map_err(|e| CliError::Bench(format!("a producer task failed: {e}")))??;
    }
    report(what, done, started.elapsed());
    Ok(())
}

/// What a phase wrote to make its jobs durable: PostgreSQL's WAL, server-wide; on SQLite,
/// what this process handed to `write()`, which is the log's frames and the checkpoints
/// that copy them into the database (nothing else of the bench writes meanwhile).
enum Written {
    Wal(i64),
    Process(u64),
}

impl Written {
    async fn start(queue: &Queue) -> Result<Self, CliError> {
        Ok(match queue.wal_position().await? {
            Some((at, _)) => Written::Wal(at),
            None => Written::Process(process_writes()?),
        })
    }

    async fn report(self, queue: &Queue, jobs: usize) -> Result<(), CliError> {
        let (what, bytes) = match self {
            Written::Wal(from) => {
                let to = queue.wal_position().await?.map_or(from, |(at, _)| at);
                ("WAL", (to - from) as f64)
            }
            Written::Process(from) => (
                "written (log frames and checkpoints)",
                process_writes()?.saturating_sub(from) as f64,
            ),
        };
        println!(
            "{:<58} {:>8.0} bytes per job",
            format!("  {what}"),
            bytes / jobs.max(1) as f64
        );
        Ok(())
    }
}

/// The bytes this process has passed to `write()` and its kin so far (`wchar` in
/// `/proc/self/io`).
fn process_writes() -> Result<u64, CliError> {
    let io = std::fs::read_to_string("/proc/self/io")
        .map_err(|e| CliError::Bench(format!("cannot read /proc/self/io: {e}")))?;
    io.lines()
        .find_map(|line| line.strip_prefix("wchar:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| CliError::Bench("/proc/self/io has no wchar line".into()))
}

fn report(what: &str, jobs: usize, took: Duration) {
    println!(
        "{what:<58} {jobs:>7} jobs in {:>7.2} s = {:>8.0} jobs/s",
        took.as_secs_f64(),
        jobs as f64 / took.as_secs_f64()
    );
}

/// Starts `producers` tasks enqueueing `jobs` no-op tasks between them.
fn produce(
    queue: &Queue,
    producers: usize,
    jobs: usize,
) -> Vec<tokio::task::JoinHandle<Result<(), queue::QueueError>>> {
    (0..producers)
        .map(|p| {
            let queue = queue.clone();
            // Producer p enqueues jobs p, p + P, p + 2P, ...: N in all between them.
            let mine: Vec<usize> = (p..jobs).step_by(producers).collect();
            tokio::spawn(async move {
                for i in mine {
                    queue.create_job(&noop_task(i), Some("bench")).await?;
                }
                Ok(())
            })
        })
        .collect()
}

/// Milliseconds from `create_job` being called to the idle worker's HTTP claim answer, sorted.
async fn claim_latency(queue: &Queue, samples: usize) -> Result<Vec<f64>, CliError> {
    let minted = mint("bench-worker", TokenKind::Worker, Scope::any_worker())
        .map_err(CliError::Bootstrap)?;
    queue.create_token(minted.record).await?;
    let (url, server) = serve_api(queue).await?;
    let client = worker::client::QueueClient::new(&url, &minted.secret)
        .map_err(|e| CliError::Bench(e.to_string()))?;

    // The worker reports the instant each claim answer arrived; the producer waits for it.
    let (claimed_tx, mut claimed_rx) = tokio::sync::mpsc::channel::<Instant>(1);
    let worker = tokio::spawn(async move {
        let params = contract::api::ClaimBody {
            capabilities: Some(CAPABILITIES.iter().map(|c| c.to_string()).collect()),
            wait_seconds: Some(30.0),
            ..Default::default()
        };
        loop {
            let Some(job) = client.claim(&params).await? else {
                continue;
            };
            let at = Instant::now();
            client.complete(&job.id, job.attempt, None).await?;
            if claimed_tx.send(at).await.is_err() {
                return Ok::<_, worker::client::ClientError>(());
            }
        }
    });

    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        // Let the worker's next long-poll reach the server and park before the job exists.
        tokio::time::sleep(Duration::from_millis(3)).await;
        let created = Instant::now();
        queue.create_job(&noop_task(i), Some("bench")).await?;
        let claimed = tokio::time::timeout(Duration::from_secs(10), claimed_rx.recv())
            .await
            .ok()
            .flatten()
            .ok_or_else(|| CliError::Bench("the long-polling worker stopped answering".into()))?;
        latencies.push(claimed.saturating_duration_since(created).as_secs_f64() * 1000.0);
    }
    drop(claimed_rx);
    worker.abort();
    server.abort();
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

/// The REST API over `queue` on a free loopback port: its base URL and the serving task.
pub(crate) async fn serve_api(
    queue: &Queue,
) -> Result<(String, tokio::task::JoinHandle<std::io::Result<()>>), CliError> {
    let router = api::router(queue.config().max_artifact_bytes).with_state(AppState {
        queue: queue.clone(),
        limits: Limits::default(),
        closing: Default::default(),
        metrics: std::sync::Arc::new(crate::metrics::Metrics::new(None)),
        github: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|source| CliError::Bind {
            addr: "127.0.0.1:0".into(),
            source,
        })?;
    let addr = listener.local_addr().map_err(CliError::Serve)?;
    let server = tokio::spawn(axum::serve(listener, router).into_future());
    Ok((format!("http://{addr}"), server))
}

/// The nearest-rank percentile of sorted values.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&values, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    /// A small SQLite run, with at most this many running per repository (0: no limit).
    fn small(max_running_per_repository: u32) -> BenchArgs {
        BenchArgs {
            backend: Backend::Sqlite,
            jobs: 20,
            workers: 2,
            producers: 3,
            batch: 4,
            samples: 3,
            pg_url: String::new(),
            max_running_per_repository,
            peer: None,
            peer_dir: None,
            rounds: 1,
            settle_secs: 0,
        }
    }

    #[tokio::test]
    async fn a_small_sqlite_run_completes_every_job() {
        run(small(0)).await.unwrap();
    }

    #[tokio::test]
    async fn a_small_run_under_a_repository_limit_completes_every_job() {
        run(small(1)).await.unwrap();
    }
}
