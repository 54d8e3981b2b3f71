//! The watchers of `stepwise bench scale`: many Server-Sent Events streams held open at once,
//! in a process apart from the server (`stepwise bench watchers-client`, hidden), so that the
//! server's memory and CPU are its own. A Rust process, not a script: the client shares the
//! machine's cores with the server, and the less it spends per event, the more of each
//! figure is the server's.
//!
//! It prints `ready` once every stream answered, then, for every event of the bench, when
//! it arrived: `job <event id> <ns since the epoch>` and `list <job id> <ns>`. It ends when
//! every watcher saw `--rounds` events, or after a minute.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use contract::api::jobs::{JobChange, JobChangeKind};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use worker::client::{SseMessage, SseParser};

use crate::cli::error::CliError;

#[derive(Debug, Args)]
pub struct WatchersArgs {
    /// The server, as host:port.
    #[arg(long)]
    addr: String,
    /// A session cookie (`name=value`) that may read the job.
    #[arg(long)]
    cookie: String,
    /// The job whose event stream the first watchers follow.
    #[arg(long)]
    job: String,
    /// Watchers on the job's event stream.
    #[arg(long)]
    job_watchers: usize,
    /// Watchers on the jobs stream.
    #[arg(long)]
    list_watchers: usize,
    /// Events each watcher waits for.
    #[arg(long)]
    rounds: usize,
    /// The job's newest event before the bench: the streams start after it.
    #[arg(long, default_value_t = 0)]
    after: i64,
}

/// What a watcher follows, and so which of its messages count.
#[derive(Clone, Copy)]
enum Follows {
    /// One job's events: every `id:` past the starting cursor.
    Job { after: i64 },
    /// The jobs stream: every change of a job.
    List,
}

/// How long the watchers may take to connect, and then to see every round.
const PATIENCE: Duration = Duration::from_secs(60);

pub async fn run(args: WatchersArgs) -> Result<(), CliError> {
    let fail = |e: String| CliError::Bench(format!("watchers: {e}"));
    let (arrivals, mut arrived) = mpsc::unbounded_channel::<String>();
    let mut ready = Vec::new();
    let mut watchers = tokio::task::JoinSet::new();
    for i in 0..args.job_watchers + args.list_watchers {
        let (path, follows) = if i < args.job_watchers {
            let path = format!(
                "/api/queue/jobs/{}/events/stream?after={}",
                args.job, args.after
            );
            (path, Follows::Job { after: args.after })
        } else {
            ("/api/queue/jobs/stream".to_string(), Follows::List)
        };
        let request = format!(
            "GET {path} HTTP/1.0\r\nHost: {}\r\nCookie: {}\r\nAccept: text/event-stream\r\n\r\n",
            args.addr, args.cookie
        );
        let (connected, answered) = oneshot::channel();
        ready.push(answered);
        let watch = Watcher {
            addr: args.addr.clone(),
            request,
            follows,
            rounds: args.rounds,
            arrivals: arrivals.clone(),
        };
        watchers.spawn(watch.run(connected));
    }
    drop(arrivals);
    // In the order they answer, so that the first refusal is named at once.
    let total = ready.len();
    let mut answered = 0;
    let mut ready: FuturesUnordered<_> = ready.into_iter().collect();
    let all_connected = async {
        while let Some(answer) = ready.next().await {
            match answer {
                Ok(Ok(())) => answered += 1,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err("a watcher ended before it connected".to_string()),
            }
        }
        Ok(())
    };
    match tokio::time::timeout(PATIENCE, all_connected).await {
        Ok(connected) => connected.map_err(fail)?,
        Err(_) => {
            return Err(fail(format!(
                "{answered} of {total} streams answered within {PATIENCE:?}"
            )));
        }
    }
    println!("ready");
    // A watcher that saw every round hands its stream back, still open, and it stays open
    // until all are done: a thousand hang-ups at once would cost both processes CPU while
    // the others still wait for their last event, and users' tabs do not hang up either.
    let mut open = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, async {
        while let Some(done) = watchers.join_next().await {
            open.extend(done.ok().flatten());
        }
    })
    .await;
    watchers.abort_all();
    let mut out = String::new();
    while let Ok(line) = arrived.try_recv() {
        out.push_str(&line);
        out.push('\n');
    }
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(out.as_bytes())
        .await
        .map_err(|e| fail(e.to_string()))?;
    stdout.flush().await.map_err(|e| fail(e.to_string()))
}

struct Watcher {
    addr: String,
    request: String,
    follows: Follows,
    rounds: usize,
    arrivals: mpsc::UnboundedSender<String>,
}

impl Watcher {
    /// The stream, still open, once it brought every round.
    async fn run(self, connected: oneshot::Sender<Result<(), String>>) -> Option<TcpStream> {
        let (stream, body) = match self.connect().await {
            Ok(open) => open,
            Err(e) => {
                let _ = connected.send(Err(e));
                return None;
            }
        };
        let _ = connected.send(Ok(()));
        self.follow(stream, body).await
    }

    /// Sends the request and reads the answer's head; what came after it is the body's start.
    async fn connect(&self) -> Result<(TcpStream, Vec<u8>), String> {
        let mut stream = TcpStream::connect(&self.addr)
            .await
            .map_err(|e| format!("connect to {}: {e}", self.addr))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream
            .write_all(self.request.as_bytes())
            .await
            .map_err(|e| format!("send the request: {e}"))?;
        let mut head = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|e| format!("read the answer: {e}"))?;
            if n == 0 {
                return Err("the server closed the stream before answering".into());
            }
            head.extend_from_slice(&chunk[..n]);
            if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                let status = head.split(|&b| b == b'\n').next().unwrap_or_default();
                if !String::from_utf8_lossy(status).contains(" 200 ") {
                    return Err(format!(
                        "answered {}",
                        String::from_utf8_lossy(status).trim()
                    ));
                }
                return Ok((stream, head.split_off(end + 4)));
            }
        }
    }

    /// Reads whole chunks, not lines: one read, and one timestamp, per burst the server
    /// sends, so that the client's own delay stays out of the figures as far as it can.
    async fn follow(self, mut stream: TcpStream, body: Vec<u8>) -> Option<TcpStream> {
        let mut parser = SseParser::new();
        let mut seen = 0;
        let mut chunk = vec![0u8; 64 * 1024];
        let mut messages = parser.push(&body);
        let mut at = now_ns();
        loop {
            for message in messages {
                if let Some(line) = self.counted(&message, at) {
                    seen += 1;
                    if self.arrivals.send(line).is_err() {
                        return None;
                    }
                }
            }
            if seen >= self.rounds {
                return Some(stream);
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => {
                    at = now_ns();
                    messages = parser.push(&chunk[..n]);
                }
            }
        }
    }

    /// The line to print for one SSE message, if it is one the bench waits for.
    fn counted(&self, message: &SseMessage, at: u128) -> Option<String> {
        match self.follows {
            Follows::Job { after } => {
                let id: i64 = message.id.as_deref()?.parse().ok()?;
                (id > after).then(|| format!("job {id} {at}"))
            }
            Follows::List => {
                let change: JobChange = serde_json::from_str(&message.data).ok()?;
                (change.what == JobChangeKind::Changed)
                    .then(|| format!("list {} {at}", change.job_id))
            }
        }
    }
}

pub(super) fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
