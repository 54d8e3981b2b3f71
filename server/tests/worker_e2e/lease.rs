//! A worker that loses its server: through a relay that can be switched off, the worker is
//! cut off mid-step. Within its lease it loses nothing (reports wait and go in order);
//! past it, it stops the step and publishes nothing. With two servers it moves on.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use contract::JobState;
use contract::job::task;
use queue::{Role, TokenKind};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use worker::client::QueueClient;
use worker::runner::{Shutdown, WorkerConfig, run};
use worker::testing::{alive, remote, stage_config};

use stepwise::testing::server::{TestServer, start};

/// The relay's accept loop and the connections it opened, while it is on.
type Relaying = Option<(JoinHandle<()>, Vec<JoinHandle<()>>)>;

/// A TCP relay to the server that can be switched off (its port refuses connections and
/// every open one is cut, as a dead replica's would) and on again at the same address.
struct Switch {
    addr: SocketAddr,
    upstream: SocketAddr,
    state: Arc<Mutex<Relaying>>,
}

impl Switch {
    async fn to(upstream: SocketAddr) -> Switch {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let switch = Switch {
            addr,
            upstream,
            state: Arc::default(),
        };
        switch.serve(listener);
        switch
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn serve(&self, listener: TcpListener) {
        let upstream = self.upstream;
        let state = self.state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let relay = tokio::spawn(async move {
                    let (mut client, mut server) = (client, server);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                if let Some((_, open)) = state.lock().unwrap().as_mut() {
                    open.push(relay);
                }
            }
        });
        *self.state.lock().unwrap() = Some((accept, Vec::new()));
    }

    fn off(&self) {
        if let Some((accept, open)) = self.state.lock().unwrap().take() {
            accept.abort();
            open.into_iter().for_each(|c| c.abort());
        }
    }

    async fn on(&self) {
        // The listener was dropped with its task; the address is free again.
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => break listener,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        self.serve(listener);
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.off();
    }
}

struct Setup {
    server: TestServer,
    user: QueueClient,
    remote: String,
    tmp: tempfile::TempDir,
    shutdown: Shutdown,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.stop.cancel();
        self.shutdown.hand_back.cancel();
    }
}

/// A server, and a worker that reaches it through `servers(server)` with a `lease`.
async fn setup(servers: &[String], server: TestServer, lease: Duration) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let mut config = WorkerConfig::new(stage_config(tmp.path()));
    config.claim_wait = Duration::from_secs(1);
    config.lease = lease;
    let token = server.token("cut-off", TokenKind::Worker, None).await;
    let urls: Vec<&str> = servers.iter().map(String::as_str).collect();
    let client = QueueClient::with_servers(&urls, &token).unwrap();
    let shutdown = Shutdown::default();
    tokio::spawn(run(client, config, shutdown.clone()));
    let user = server.user(Role::Operator).await;
    Setup {
        server,
        user,
        remote,
        tmp,
        shutdown,
    }
}

impl Setup {
    async fn submit(&self, publish: &str, steps: serde_json::Value) -> contract::Job {
        let payload = json!({ "repository": self.remote, "task": {
            "instructions": "Greet", "runtime": { "mode": "claude" },
            "publish": { "mode": publish }, "steps": steps,
        }});
        self.user
            .create_job(&json!({ "payload": payload }))
            .await
            .unwrap()
    }

    async fn until(&self, job: &contract::Job, what: &str, done: impl Fn(&contract::Job) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let current = self.user.get_job(&job.id).await.unwrap();
            if done(&current) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what} never happened: {current:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The job's step log lines, in the order the server has them.
    async fn logged(&self, job: &contract::Job) -> Vec<String> {
        let events = self
            .user
            .list_events(&job.id, None, Some(1000))
            .await
            .unwrap();
        events
            .into_iter()
            .filter(|e| e.kind == task::STEP_LOG)
            .flat_map(|e| e.message.lines().map(str::to_string).collect::<Vec<_>>())
            .collect()
    }
}

async fn pid_in(file: &std::path::Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_worker_cut_off_from_its_server_stops_the_step_before_the_lease_ends_and_publishes_nothing()
 {
    let server = start().await;
    let relay = Switch::to(server.addr).await;
    let lease = Duration::from_secs(3);
    let s = setup(&[relay.url()], server, lease).await;
    let (agent, child) = (
        s.tmp.path().join("agent.pid"),
        s.tmp.path().join("child.pid"),
    );
    let job = s
        .submit(
            "branch",
            json!([{ "instructions": format!(
                "@fake pid {}\n@fake spawn-child {}\n@fake sleep 60",
                agent.display(),
                child.display()
            ) }]),
        )
        .await;
    let (agent, child) = (pid_in(&agent).await, pid_in(&child).await);
    // Heartbeats renew the lease every second; the last one before the cut came at most
    // that long ago, so the lease ends at most 3 s after the cut.
    let cut = Instant::now();
    relay.off();
    while alive(agent) || alive(child) {
        assert!(
            cut.elapsed() < lease,
            "the step still ran {:?} after the worker lost its server (lease {lease:?})",
            cut.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopped = cut.elapsed();
    eprintln!(
        "cut off → step stopped in {} ms (lease {lease:?})",
        stopped.as_millis()
    );
    // Nothing was published, nor will be: no branch on the remote, no pull request.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let branches = worker::testing::run(std::path::Path::new(&s.remote), &["branch", "--list"]);
    assert!(!branches.contains("task/"), "{branches}");
    let gh_log = std::fs::read_to_string(s.tmp.path().join("gh.log")).unwrap_or_default();
    assert!(gh_log.is_empty(), "{gh_log}");
    // The lost attempt's workspace is gone: nothing of it can be handed over any more.
    assert!(!s.tmp.path().join("work").join(job.id.to_string()).exists());
    // The server still has the job running under the lost lease, for its rescuer.
    let current = s.server.queue().get_job(&job.id).await.unwrap();
    assert_eq!(current.status, JobState::Running);
    assert_eq!(current.attempt, 1);
}

#[tokio::test]
async fn reports_written_while_the_server_is_briefly_unreachable_arrive_in_order() {
    let server = start().await;
    let relay = Switch::to(server.addr).await;
    let s = setup(&[relay.url()], server, Duration::from_secs(20)).await;
    let mut script = String::new();
    for word in ["one", "two", "three", "four", "five", "six"] {
        script.push_str(&format!("@fake say {word}\n@fake sleep 0.5\n"));
    }
    let job = s.submit("none", json!([{ "instructions": script }])).await;
    // Cut off for 2 s while the agent goes on talking, then back.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.logged(&job).await.iter().any(|l| l.contains("one")) {
        assert!(Instant::now() < deadline, "the first line never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relay.off();
    tokio::time::sleep(Duration::from_secs(2)).await;
    relay.on().await;
    s.until(&job, "the end", |j| j.status.is_terminal()).await;
    let done = s.user.get_job(&job.id).await.unwrap();
    assert_eq!(done.status, JobState::Succeeded, "{done:?}");
    let said: Vec<String> = s
        .logged(&job)
        .await
        .into_iter()
        .filter(|l| ["one", "two", "three", "four", "five", "six"].contains(&l.as_str()))
        .collect();
    assert_eq!(said, ["one", "two", "three", "four", "five", "six"]);
}

#[tokio::test]
async fn a_worker_moves_to_the_next_server_when_its_first_cannot_be_reached() {
    let server = start().await;
    let (first, second) = (Switch::to(server.addr).await, Switch::to(server.addr).await);
    let s = setup(&[first.url(), second.url()], server, Duration::from_secs(6)).await;
    let pid = s.tmp.path().join("agent.pid");
    let job = s
        .submit(
            "none",
            json!([{ "instructions": format!(
                "@fake pid {}\n@fake say before\n@fake sleep 4\n@fake say after",
                pid.display()
            ) }]),
        )
        .await;
    pid_in(&pid).await;
    // The first server dies mid-step, for good; heartbeats, reports and the end of the
    // job go to the second, and the step is never stopped.
    first.off();
    s.until(&job, "the end", |j| j.status.is_terminal()).await;
    let done = s.user.get_job(&job.id).await.unwrap();
    assert_eq!(done.status, JobState::Succeeded, "{done:?}");
    let logged = s.logged(&job).await;
    assert!(logged.iter().any(|l| l == "after"), "{logged:?}");
    // A second job is claimed through the second server alone.
    let next = s
        .submit("none", json!([{ "instructions": "@fake say again" }]))
        .await;
    s.until(&next, "the second job", |j| j.status == JobState::Succeeded)
        .await;
}

#[tokio::test]
async fn a_worker_that_cannot_confirm_its_lease_does_not_publish_work_it_finished() {
    let server = start().await;
    let relay = Switch::to(server.addr).await;
    let lease = Duration::from_secs(4);
    let s = setup(&[relay.url()], server, lease).await;
    let pid = s.tmp.path().join("agent.pid");
    let job = s
        .submit(
            "branch",
            json!([{ "instructions": format!(
                "@fake pid {}\n@fake write done.txt finished\n@fake sleep 1",
                pid.display()
            ) }]),
        )
        .await;
    pid_in(&pid).await;
    // Cut off while the step still runs: it ends well within the lease, and publishing
    // would push to the remote, which the worker still reaches. Without a heartbeat that
    // succeeds first, it must not.
    relay.off();
    tokio::time::sleep(lease + Duration::from_secs(2)).await;
    let branches = worker::testing::run(std::path::Path::new(&s.remote), &["branch", "--list"]);
    assert!(
        !branches.contains("task/"),
        "published without its lease: {branches}"
    );
    assert!(!s.tmp.path().join("work").join(job.id.to_string()).exists());
}
