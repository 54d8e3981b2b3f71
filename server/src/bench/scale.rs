//! `stepwise bench scale`: how the cost grows with the work, printed, never asserted.
//!
//! 1. the jobs list with `--jobs` jobs in the store (a million by default): the API's first
//!    page, filters on a rare state, on running and on succeeded, a cursor deep in the
//!    list, and the dashboard's list page, each p50 / p99 over `--samples` requests; the
//!    database's size per job;
//! 2. one job with `--log-lines` log lines (a hundred thousand by default): the job page's
//!    server render (time and bytes: the page must not grow with the log), reading every
//!    event through the API's pages, and the event stream's replay from the start;
//! 3. `--watchers` event streams on one running job and as many on the jobs stream, held by
//!    a process apart: write → delivered p50 / p99 across all of them, and the server's
//!    memory and CPU beside the client's (see `watchers`);
//! 4. retention compacting those lines into the step's log file: its time, and the
//!    database's size before and after.
//!
//! The bulk rows are written by `queue`'s `seed` feature, behind the state machine's back:
//! copies of one finished job, and numbered log lines. Requests go through the whole site
//! router in process (auth, sessions, rendering), without a socket.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use clap::Args;
use contract::{JobId, JobState};
use futures_util::StreamExt;
use queue::{Retention, RetentionConfig};
use serde_json::Value;
use tower::ServiceExt;

use super::jobs::{claimed, task};
use super::queue::{Backend, percentile};
use crate::cli::error::CliError;
use crate::testing::site::{TestDb, get, session_cookie, test_site_on};

#[derive(Debug, Args)]
pub struct ScaleArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backend,
    /// Jobs in the store for the list's figures.
    #[arg(long, default_value_t = 1_000_000)]
    jobs: usize,
    /// Log lines of the one chatty job.
    #[arg(long, default_value_t = 100_000)]
    log_lines: u32,
    /// Requests timed per figure.
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Event streams held open on one running job, and as many on the jobs stream.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Writes each watcher waits for (one log line and one new job a round).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// The `stepwise` binary that holds the watchers' streams (default: this one).
    #[arg(long, hide = true)]
    client_bin: Option<PathBuf>,
}

/// Jobs copied per statement while seeding.
const SEED_CHUNK: usize = 10_000;

pub async fn run(args: ScaleArgs) -> Result<(), CliError> {
    if [
        args.jobs,
        args.samples,
        args.log_lines as usize,
        args.watchers,
        args.rounds,
    ]
    .contains(&0)
    {
        return Err(CliError::Usage(
            "--jobs, --log-lines, --samples, --watchers and --rounds must be at least 1".into(),
        ));
    }
    let site = tempfile::tempdir().map_err(|e| CliError::Bench(e.to_string()))?;
    // PostgreSQL: a scratch database on STEPWISE_TEST_PG_URL's server, dropped at the end.
    let db = TestDb::new(match args.backend {
        Backend::Sqlite => crate::testing::site::Backend::Sqlite,
        Backend::Postgres => crate::testing::site::Backend::Postgres,
    })
    .await;
    let (app, queue) = test_site_on(site.path(), "none", db.url.as_deref()).await;
    let cookie = session_cookie(&queue).await;
    let bench = Bench {
        app,
        cookie,
        samples: args.samples,
    };
    println!(
        "backend: {:?}   jobs: {}   log lines: {}   samples per figure: {}",
        args.backend, args.jobs, args.log_lines, args.samples
    );

    // 1. The jobs list.
    let template = finished_job(&queue, "a finished job to copy").await?;
    let started = Instant::now();
    let mut ids = Vec::with_capacity(args.jobs);
    ids.push(template);
    let mut chunk = 0;
    while ids.len() < args.jobs {
        let n = SEED_CHUNK.min(args.jobs - ids.len());
        // One chunk in 20 failed and one in 50 cancelled: a status filter finds a few.
        let status = match chunk {
            c if c % 20 == 1 => JobState::Failed,
            c if c % 50 == 2 => JobState::Cancelled,
            _ => JobState::Succeeded,
        };
        ids.extend(queue.seed_copies(&template, n, status).await?);
        chunk += 1;
        if chunk % 10 == 0 {
            eprintln!(
                "  seeded {} jobs ({:.0} s)",
                ids.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    let size = queue.database_size().await?;
    println!(
        "seeded {} jobs in {:.1} s; database {:.1} MiB, {:.0} bytes per job (rows and indexes, no events)",
        ids.len(),
        started.elapsed().as_secs_f64(),
        size as f64 / 1048576.0,
        size as f64 / ids.len() as f64
    );
    let deep = ids[ids.len() / 2];
    bench
        .time("API list, first page of 50", "/api/queue/jobs?limit=50")
        .await;
    bench
        .time(
            "API list, status=failed",
            "/api/queue/jobs?status=failed&limit=50",
        )
        .await;
    // Neither state has an index of its own (migration 0023): the running jobs are read
    // through the claim's index of them, none here; the succeeded along the primary key.
    bench
        .time(
            "API list, status=running",
            "/api/queue/jobs?status=running&limit=50",
        )
        .await;
    bench
        .time(
            "API list, status=succeeded",
            "/api/queue/jobs?status=succeeded&limit=50",
        )
        .await;
    bench
        .time(
            "API list, cursor halfway down",
            &format!("/api/queue/jobs?limit=50&cursor={deep}"),
        )
        .await;
    bench.time("dashboard list page", "/tasks/queue").await;
    bench
        .time(
            "dashboard list page, status=failed",
            "/tasks/queue?status=failed",
        )
        .await;

    // 2. One chatty job.
    let chatty = chatty_job(&queue, args.log_lines).await?;
    let events = queue.count_events(&chatty).await?;
    println!("a job with {events} events ({} log lines):", args.log_lines);
    bench
        .time(
            "job page (server render)",
            &format!("/tasks/queue/{chatty}"),
        )
        .await;
    bench.walk_events(&chatty, events).await;
    bench.replay(&chatty, events).await;

    // 3. Many watchers.
    println!(
        "{} watchers on one job and {0} on the jobs stream:",
        args.watchers
    );
    let client = super::binary_or_this(args.client_bin.as_deref())?;
    super::watchers::measure(super::watchers::Watch {
        queue: &queue,
        app: bench.app.clone(),
        cookie: &bench.cookie,
        watchers: args.watchers,
        rounds: args.rounds,
        client: &client,
    })
    .await?;

    // 4. Retention compacts the log lines into the step's log file, in a first pass that
    //    visits every finished job (the seeded ones have no lines: one short write each).
    let before = queue.database_size().await?;
    let started = Instant::now();
    let compact = RetentionConfig {
        logs_after: Some(Duration::ZERO),
        history_after: None,
        // Nothing else writes meanwhile: the job just made may be walked past at once.
        walk_slack: Duration::ZERO,
        ..RetentionConfig::default()
    };
    tokio::time::sleep(Duration::from_millis(2)).await;
    let report = Retention::new(queue.clone(), compact).run_once().await?;
    let after = queue.database_size().await?;
    println!(
        "retention's first pass over {} finished jobs: {} log lines compacted in {:.2} s; \
         database {:.1} MiB before, {:.1} MiB after (freed pages are reused, not returned to \
         the file system)",
        ids.len() + 1,
        report.log_lines,
        started.elapsed().as_secs_f64(),
        before as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    drop(queue);
    drop(db);
    Ok(())
}

struct Bench {
    app: axum::Router,
    cookie: String,
    samples: usize,
}

impl Bench {
    /// `samples` logged-in GETs of `uri`, one at a time: p50 / p99 and the answer's size.
    async fn time(&self, what: &str, uri: &str) {
        let mut took = Vec::with_capacity(self.samples);
        let mut bytes = 0;
        for _ in 0..self.samples {
            let started = Instant::now();
            let (status, _, body) = get(&self.app, &self.cookie, uri).await;
            took.push(started.elapsed().as_secs_f64() * 1000.0);
            if status != StatusCode::OK {
                println!(
                    "  {what:<42} {status}: {}",
                    body.chars().take(200).collect::<String>()
                );
                return;
            }
            bytes = body.len();
        }
        took.sort_by(f64::total_cmp);
        println!(
            "  {what:<42} p50 {:>7.2} ms   p99 {:>7.2} ms   {:>8} bytes",
            percentile(&took, 50.0),
            percentile(&took, 99.0),
            bytes
        );
    }

    /// Every event through the API's pages of 1,000.
    async fn walk_events(&self, job: &JobId, total: u64) {
        let started = Instant::now();
        let mut after = 0;
        let mut seen = 0;
        let mut took = Vec::new();
        loop {
            let uri = format!("/api/queue/jobs/{job}/events?after={after}&limit=1000");
            let page_started = Instant::now();
            let (status, _, body) = get(&self.app, &self.cookie, &uri).await;
            took.push(page_started.elapsed().as_secs_f64() * 1000.0);
            if status != StatusCode::OK {
                println!("  events API: {status}");
                return;
            }
            let page: Value = serde_json::from_str(&body).unwrap_or_default();
            let items = page["items"].as_array().cloned().unwrap_or_default();
            let Some(last) = items.last().and_then(|e| e["id"].as_i64()) else {
                break;
            };
            seen += items.len() as u64;
            after = last;
        }
        took.sort_by(f64::total_cmp);
        println!(
            "  {:<42} {seen} of {total} events in {:.2} s; a page p50 {:.2} ms, p99 {:.2} ms",
            "events API, every page of 1,000",
            started.elapsed().as_secs_f64(),
            percentile(&took, 50.0),
            percentile(&took, 99.0)
        );
    }

    /// The event stream from the start, until it has sent every stored event.
    async fn replay(&self, job: &JobId, total: u64) {
        let request = Request::get(format!("/api/queue/jobs/{job}/events/stream"))
            .header("cookie", &self.cookie)
            .body(Body::empty())
            .expect("a request");
        let started = Instant::now();
        let Ok(response) = self.app.clone().oneshot(request).await;
        let mut stream = response.into_body().into_data_stream();
        let mut seen = 0u64;
        let mut first = None;
        while seen < total {
            match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
                Ok(Some(Ok(chunk))) => {
                    first.get_or_insert_with(|| started.elapsed());
                    seen += chunk.windows(4).filter(|w| w == b"\nid:").count() as u64
                        + u64::from(chunk.starts_with(b"id:"));
                }
                _ => break,
            }
        }
        println!(
            "  {:<42} {seen} of {total} events in {:.2} s (first after {:.1} ms)",
            "event stream, replay from the start",
            started.elapsed().as_secs_f64(),
            first.unwrap_or_default().as_secs_f64() * 1000.0
        );
    }
}

async fn finished_job(queue: &queue::Queue, title: &str) -> Result<JobId, CliError> {
    let (id, fence) = claimed(queue, title).await?;
    queue.complete(&id, &fence, Some("done".into())).await?;
    Ok(id)
}

/// A finished job whose one step logged `lines` lines, its log file stored.
async fn chatty_job(queue: &queue::Queue, lines: u32) -> Result<JobId, CliError> {
    let (id, fence) = claimed(queue, "a chatty agent").await?;
    // The task's one step, as the worker names it in its events.
    let task = contract::normalize(&task("a chatty agent"), &contract::Defaults::default())
        .map_err(|e| CliError::Bench(format!("the bench's task: {e:?}")))?;
    let step = task
        .resolved_steps()
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Bench("the bench's task has no step".into()))?;
    let started = contract::events::StepStarted {
        step: (&step).into(),
    };
    let started = contract::NewEvent {
        kind: contract::job::task::STEP_STARTED.into(),
        payload: contract::events::TaskEvent::payload(&started),
        ..contract::NewEvent::default()
    };
    queue.append_event(&id, &fence, started).await?;
    let mut left = lines;
    while left > 0 {
        let n = left.min(10_000);
        queue.seed_log_lines(&id, 0, n).await?;
        left -= n;
    }
    let log = format!("{}\n", "output line of a chatty agent");
    queue
        .add_artifact(
            &id,
            &fence,
            &contract::job::task::step_log(0),
            "text/plain",
            log.repeat(1000).as_bytes(),
        )
        .await?;
    queue
        .complete(&id, &fence, Some("said a lot".into()))
        .await?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_small_sqlite_run_prints_every_figure() {
        let args = ScaleArgs {
            backend: Backend::Sqlite,
            jobs: 25_000,
            log_lines: 3_000,
            samples: 3,
            watchers: 20,
            rounds: 3,
            client_bin: Some(crate::bench::built_binary()),
        };
        run(args).await.unwrap();
    }
}
