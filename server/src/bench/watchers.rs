//! `stepwise bench scale`'s watchers: N event streams on one running job and N on the jobs
//! list's stream, held by a process apart (`watch_client`), so that this process's memory
//! and CPU are the server's alone. Each round writes one log line on the watched job and
//! creates one job; every watcher notes when its copy arrived, and the delays from the
//! write to each arrival give p50 / p99 across all watchers.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use contract::NewEvent;
use contract::job::task;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::procfs::{cpu_seconds, rss_kib};
use super::queue::percentile;
use super::watch_client::now_ns;
use crate::cli::error::CliError;

/// How long apart the rounds are: enough for every watcher to have its copy.
const ROUND_GAP: Duration = Duration::from_millis(100);

pub(super) struct Watch<'a> {
    pub queue: &'a queue::Queue,
    pub app: axum::Router,
    pub cookie: &'a str,
    pub watchers: usize,
    pub rounds: usize,
    /// The `stepwise` binary whose `bench watchers-client` holds the streams.
    pub client: &'a Path,
}

pub(super) async fn measure(w: Watch<'_>) -> Result<(), CliError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| CliError::Bench(format!("{what}: {e}"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| fail("bind", &e))?;
    let addr = listener.local_addr().map_err(|e| fail("bind", &e))?;
    let server = tokio::spawn(axum::serve(listener, w.app.clone()).into_future());
    let (job, fence) = super::jobs::claimed(w.queue, "a job a thousand people watch").await?;
    let replayed = w
        .queue
        .list_latest_events(&job, 1)
        .await?
        .first()
        .map_or(0, |e| e.id);
    let rss_idle = rss_kib("self")?;
    let mut child = tokio::process::Command::new(w.client)
        .args(["bench", "watchers-client", "--addr"])
        .arg(addr.to_string())
        .arg("--cookie")
        .arg(w.cookie)
        .arg("--job")
        .arg(job.to_string())
        .arg("--job-watchers")
        .arg(w.watchers.to_string())
        .arg("--list-watchers")
        .arg(w.watchers.to_string())
        .arg("--rounds")
        .arg(w.rounds.to_string())
        .arg("--after")
        .arg(replayed.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(&format!("start {} (the watchers)", w.client.display()), &e))?;
    let client = child.id().unwrap_or_default();
    let stdout = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines();
    match tokio::time::timeout(Duration::from_secs(90), lines.next_line()).await {
        Ok(Ok(Some(line))) if line == "ready" => {}
        other => {
            return Err(CliError::Bench(format!(
                "the watchers did not connect: {other:?}"
            )));
        }
    }
    let rss_watched = rss_kib("self")?;
    let started = Instant::now();
    let server_cpu = cpu_seconds("self")?;
    let client_cpu = cpu_seconds(client)?;
    // When each write was made, and in which round.
    let mut lines_sent: HashMap<i64, (u128, usize)> = HashMap::new();
    let mut jobs_sent: HashMap<String, (u128, usize)> = HashMap::new();
    for round in 0..w.rounds {
        let at = now_ns();
        let line = NewEvent {
            kind: task::STEP_LOG.into(),
            message: format!("round {round}"),
            payload: contract::events::payload_of(&contract::events::StepLog { step_index: 0 }),
            ..NewEvent::default()
        };
        let event = w.queue.append_event(&job, &fence, line).await?;
        lines_sent.insert(event.id, (at, round));
        let at = now_ns();
        let created = w
            .queue
            .create_job(&super::jobs::task(&format!("round {round}")), Some("bench"))
            .await?;
        jobs_sent.insert(created.id.to_string(), (at, round));
        tokio::time::sleep(ROUND_GAP).await;
    }
    let mut line_delays = vec![Vec::new(); w.rounds];
    let mut list_delays = vec![Vec::new(); w.rounds];
    let read = async {
        while let Ok(Some(line)) = lines.next_line().await {
            let mut parts = line.split(' ');
            let (Some(kind), Some(key), Some(at)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(at) = at.parse::<u128>() else { continue };
            let sent = match kind {
                "job" => key.parse().ok().and_then(|id: i64| lines_sent.get(&id)),
                _ => jobs_sent.get(key),
            };
            let Some(&(sent, round)) = sent else { continue };
            let ms = at.saturating_sub(sent) as f64 / 1e6;
            match kind {
                "job" => line_delays[round].push(ms),
                _ => list_delays[round].push(ms),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(120), read).await;
    // Read before the client is reaped: an exited process still answers until then.
    let client_cpu = cpu_seconds(client).map(|cpu| cpu - client_cpu);
    let server_cpu = cpu_seconds("self")? - server_cpu;
    let elapsed = started.elapsed().as_secs_f64();
    let rss_after = rss_kib("self")?;
    let _ = child.kill().await;
    server.abort();
    let expected = w.watchers * w.rounds;
    for (what, rounds) in [
        ("one job's event stream", line_delays),
        ("the jobs stream", list_delays),
    ] {
        let mut delays: Vec<f64> = rounds.iter().flatten().copied().collect();
        delays.sort_by(f64::total_cmp);
        println!(
            "  {what:<42} {} watchers: {} of {expected} deliveries, write → delivered p50 {:.1} ms, p99 {:.1} ms",
            w.watchers,
            delays.len(),
            percentile(&delays, 50.0),
            percentile(&delays, 99.0)
        );
        // Whether the tail is one slow round or spread over all of them.
        let slowest: Vec<String> = rounds
            .iter()
            .map(|round| format!("{:.0}", round.iter().copied().fold(0.0, f64::max)))
            .collect();
        println!(
            "    the last delivery of each round, ms: {}",
            slowest.join(" ")
        );
    }
    println!(
        "  server RSS: {} MiB idle, {} MiB with {} streams open, {} MiB after {} rounds",
        rss_idle / 1024,
        rss_watched / 1024,
        2 * w.watchers,
        rss_after / 1024,
        w.rounds
    );
    // Both share the machine's cores: the more the client takes, the less the figures
    // above are the server's alone.
    let share = |cpu: f64| format!("{cpu:.2} CPU s ({:.0} % of a core)", cpu / elapsed * 100.0);
    println!(
        "  over the {elapsed:.1} s of the rounds: server (with the bench's writer) {}, watchers' client {}",
        share(server_cpu),
        client_cpu.map_or_else(|e| format!("unknown ({e})"), share)
    );
    Ok(())
}
