//! The sandbox for real, in both worker modes: `stepwise serve`'s embedded worker and a
//! standalone `stepwise worker`, each started with secrets in its environment and a
//! machine planted with what a step must not reach (`sandbox/probe.rs`). A step that runs
//! the probe (the scripted agent's shell, as a plain script would) is refused every reach
//! while its checkout, its HOME and its /tmp stay writable; with `--agent-network none` it
//! has no network; a cancel, and a worker killed with SIGKILL, leave nothing of the box
//! running. The real CLIs run the same probe in `real_agents.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use contract::{Job, JobState};
use serde_json::json;
use worker::client::QueueClient;

use common::{BIN, Process, wait_for, wait_up_to};

mod common;
#[path = "sandbox/probe.rs"]
mod probe;

/// A machine for one test: the remote with the probe, the planted reaches, the scripted
/// agent.
struct Machine {
    tmp: tempfile::TempDir,
    remote: String,
    data: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        // Not under /tmp: inside the box /tmp is the job's own, so a write the probe tries
        // under the host's /tmp would land in the job's and could not be told from a leak.
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let remote = worker::testing::remote(tmp.path());
        probe::add_probe(tmp.path(), &remote);
        std::fs::create_dir_all(tmp.path().join("site/pkg")).unwrap();
        let data = tmp.path().join("data");
        Machine { tmp, remote, data }
    }

    fn root(&self) -> &Path {
        self.tmp.path()
    }

    /// The worker's environment: the machine's PATH, the planted HOME and every secret.
    fn hostile_env(&self, command: &mut Command, planted: &probe::Planted) {
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &planted.user_home)
            .env("RUST_LOG", "warn")
            .envs(
                probe::SECRETS
                    .into_iter()
                    .filter(|(k, _)| *k != "DATABASE_URL"),
            );
    }

    fn worker_flags(command: &mut Command) {
        command
            .args(["--capability", "claude", "--capability", "git"])
            .arg("--claude-bin")
            .arg(worker::testing::fixture("fake-agent"))
            .args(["--keep-workspaces", "always", "--grace-seconds", "1"]);
    }

    /// `stepwise serve` with its embedded worker, in the hostile environment.
    fn serve_embedded(&self, planted: &probe::Planted, extra: &[&str]) -> common::Served {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--port", "0", "--data-dir"])
            .arg(&self.data)
            .arg("--site-root")
            .arg(self.root().join("site"))
            .args(extra)
            .stderr(Stdio::inherit());
        Machine::worker_flags(&mut command);
        self.hostile_env(&mut command, planted);
        common::serve(command)
    }

    /// `stepwise serve --no-worker`, in a plain environment.
    fn serve_alone(&self) -> common::Served {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--port", "0", "--no-worker", "--data-dir"])
            .arg(&self.data)
            .arg("--site-root")
            .arg(self.root().join("site"))
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit());
        common::serve(command)
    }

    /// A standalone `stepwise worker` for `url`, its workspaces under `workdir`, in the
    /// hostile environment with its token in STEPWISE_WORKER_TOKEN.
    fn worker(&self, url: &str, workdir: &Path, planted: &probe::Planted) -> Process {
        let token = common::worker_token(&["--data-dir".as_ref(), self.data.as_os_str()], "boxed");
        let mut command = Command::new(BIN);
        command
            .args(["worker", "--server", url, "--workdir"])
            .arg(workdir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        Machine::worker_flags(&mut command);
        self.hostile_env(&mut command, planted);
        command
            .env("STEPWISE_WORKER_TOKEN", token)
            .env("DATABASE_URL", probe::SECRETS[3].1);
        Process(command.spawn().unwrap())
    }

    async fn submit(&self, user: &QueueClient, step: &str) -> Job {
        user.create_job(&json!({ "payload": {
            "repository": self.remote,
            "task": {
                "instructions": "Probe the sandbox",
                "runtime": { "mode": "claude" },
                "publish": { "mode": "none" },
                "steps": [{ "instructions": step }],
            },
        }}))
        .await
        .unwrap()
    }
}

async fn until_done(user: &QueueClient, job: &Job) -> Job {
    wait_for("the job to end", async || {
        let job = user.get_job(&job.id).await.unwrap();
        job.status.is_terminal().then_some(job)
    })
    .await
}

/// The events of `job`, as lines to read in a failure.
async fn said(user: &QueueClient, job: &Job) -> Vec<String> {
    user.list_events(&job.id, None, Some(500))
        .await
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e.kind, e.message))
        .collect()
}

fn admin(served: &common::Served) -> QueueClient {
    QueueClient::new(&served.url, served.admin.as_ref().unwrap()).unwrap()
}

/// Runs the probe as a step (the scripted agent's shell) on `user`'s server, whose
/// processes are `pids`; the job once it succeeded.
async fn probe_step(
    m: &Machine,
    user: &QueueClient,
    planted: &probe::Planted,
    pids: &[u32],
) -> Job {
    let step = format!("@fake shell {}", planted.command(&m.data, pids));
    let job = m.submit(user, &step).await;
    let done = until_done(user, &job).await;
    assert_eq!(
        done.status,
        JobState::Succeeded,
        "{:#?}",
        said(user, &job).await
    );
    job
}

#[tokio::test]
async fn a_probing_step_of_the_embedded_worker_is_refused_every_reach() {
    let m = Machine::new();
    let planted = probe::plant(m.root(), &m.data.join("work/jobs"));
    let served = m.serve_embedded(&planted, &[]);
    let pids = [served.process.0.id()];
    let job = probe_step(&m, &admin(&served), &planted, &pids).await;
    planted.assert_held(&job.id.to_string(), &m.data, &pids);
}

#[tokio::test]
async fn a_probing_step_of_a_standalone_worker_is_refused_every_reach() {
    let m = Machine::new();
    let workdir = m.root().join("worker-work");
    let planted = probe::plant(m.root(), &workdir.join("jobs"));
    let served = m.serve_alone();
    let worker = m.worker(&served.url, &workdir, &planted);
    let pids = [served.process.0.id(), worker.0.id()];
    let job = probe_step(&m, &admin(&served), &planted, &pids).await;
    planted.assert_held(&job.id.to_string(), &m.data, &pids);
}

/// The control: the same probe without the box sees what the box hides (so the probe can
/// tell), and only the environment is still filtered.
#[tokio::test]
async fn without_the_sandbox_the_probe_reaches_the_machine_and_only_the_environment_is_filtered() {
    let m = Machine::new();
    let planted = probe::plant(m.root(), &m.data.join("work/jobs"));
    let served = m.serve_embedded(&planted, &["--sandbox", "off"]);
    let pids = [served.process.0.id()];
    let job = probe_step(&m, &admin(&served), &planted, &pids).await;
    let text = planted.result(&job.id.to_string());
    planted.clean_up();
    let leaked: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("LEAK "))
        .map(|l| l.split(':').next().unwrap_or(l))
        .collect();
    for kind in ["read", "list", "write", "process", "signal"] {
        assert!(leaked.contains(&kind), "off should leak {kind}: {text}");
    }
    assert!(
        !leaked.contains(&"env"),
        "the environment is filtered in both modes: {text}"
    );
}

/// An operator shows a folder that holds the data dir and the workspaces (`--sandbox-ro`):
/// it is shown, read-only, while the data dir inside it stays hidden and the job's own
/// mounts are made inside it.
#[tokio::test]
async fn a_shown_folder_that_holds_the_workspaces_keeps_the_data_dir_hidden() {
    let m = Machine::new();
    let planted = probe::plant(m.root(), &m.data.join("work/jobs"));
    let root = m.root().display().to_string();
    let served = m.serve_embedded(&planted, &["--sandbox-ro", &root]);
    let user = admin(&served);
    let data = m.data.display();
    let step = format!(
        "@fake shell bash sandbox-probe.sh read:{data}/stepwise.db list:{data}:stepwise.db \
         write:{root}/written-by-a-step writable:written-by-the-step"
    );
    let job = m.submit(&user, &step).await;
    let done = until_done(&user, &job).await;
    assert_eq!(
        done.status,
        JobState::Succeeded,
        "{:#?}",
        said(&user, &job).await
    );
    let text = planted.result(&job.id.to_string());
    assert!(!text.contains("LEAK"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("held")).count(),
        4,
        "{text}"
    );
    // The shown folder itself is there to read: the remote the test made, say.
    assert!(m.root().join("remote.git").is_dir());
}

/// A step that leaves a repository of its own in the checkout, with a file-system monitor
/// that would run on the host when the worker's git looks at it as a submodule: the job
/// fails saying why, and nothing of the step's runs outside the box.
#[tokio::test]
async fn a_repository_a_step_nests_in_the_checkout_stops_the_job_before_the_worker_s_git_runs_it() {
    let m = Machine::new();
    let planted = probe::plant(m.root(), &m.data.join("work/jobs"));
    let served = m.serve_embedded(&planted, &[]);
    let user = admin(&served);
    let marker = m.root().join("ran-on-the-host");
    let nest = format!(
        "@fake shell git init -q sub && echo a > sub/a && git -C sub add a && \
         git -C sub -c user.email=s@x -c user.name=s commit -qm a && \
         git -C sub config core.fsmonitor 'touch {}; false'",
        marker.display()
    );
    let job = user
        .create_job(&json!({ "payload": {
            "repository": m.remote,
            "task": {
                "instructions": "Nest",
                "runtime": { "mode": "claude" },
                "publish": { "mode": "branch" },
                "steps": [{ "instructions": nest }, { "instructions": "@fake write b.txt b" }],
            },
        }}))
        .await
        .unwrap();
    let done = until_done(&user, &job).await;
    let events = said(&user, &job).await;
    assert_eq!(done.status, JobState::Failed, "{events:#?}");
    let error = done.error_message.unwrap_or_default();
    assert!(
        error.contains("holds a git repository of a step's (sub/.git)"),
        "{error}"
    );
    assert!(
        !marker.exists(),
        "the nested repository's monitor ran on the host"
    );
}

/// Whether any process on the host works inside `dir` (its cwd is there).
fn anything_runs_in(dir: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .collect()
}

/// A step that leaves a grandchild deaf to SIGTERM behind, then waits for ever.
const STUBBORN: &str = "@fake spawn-child /tmp/child.pid\n@fake orphan /tmp/orphan.pid\n@fake say started\n@fake sleep 600";

#[tokio::test]
async fn no_network_leaves_a_step_only_its_own_loopback_and_a_cancel_leaves_nothing_of_the_box() {
    let m = Machine::new();
    let planted = probe::plant(m.root(), &m.data.join("work/jobs"));
    let served = m.serve_embedded(&planted, &["--agent-network", "none"]);
    let user = admin(&served);
    let port = served.url.rsplit(':').next().unwrap().trim_end_matches('/');
    let job = m
        .submit(
            &user,
            &format!("@fake shell bash sandbox-probe.sh connect:127.0.0.1:{port}"),
        )
        .await;
    let done = until_done(&user, &job).await;
    assert_eq!(
        done.status,
        JobState::Succeeded,
        "{:#?}",
        said(&user, &job).await
    );
    let ws = m.data.join("work/jobs").join(job.id.to_string());
    let result = std::fs::read_to_string(ws.join("repo/probe-result.txt")).unwrap();
    assert!(result.starts_with("held connect:"), "{result}");

    let job = m.submit(&user, STUBBORN).await;
    let ws = m.data.join("work/jobs").join(job.id.to_string());
    wait_for("the step to start its children", async || {
        (anything_runs_in(&ws.join("repo")).len() >= 3).then_some(())
    })
    .await;
    user.cancel_job(&job.id, None).await.unwrap();
    let done = until_done(&user, &job).await;
    assert_eq!(done.status, JobState::Cancelled);
    let left = anything_runs_in(&ws);
    assert!(left.is_empty(), "still running in the workspace: {left:?}");
}

/// A cancel reaches the step's processes in the box with SIGTERM first, as it does
/// without the box: bubblewrap is not the one signalled (its end would kill them all at
/// once), so the agent gets its grace to finish.
#[tokio::test]
async fn a_cancelled_step_in_the_box_gets_sigterm_and_its_grace() {
    let m = Machine::new();
    let planted = probe::plant(m.root(), &m.data.join("work/jobs"));
    let served = m.serve_embedded(&planted, &[]);
    let user = admin(&served);
    let job = m
        .submit(
            &user,
            "@fake on-term got-sigterm.txt\n@fake say started\n@fake sleep 60",
        )
        .await;
    let ws = m.data.join("work/jobs").join(job.id.to_string());
    wait_for("the step to run", async || {
        (!anything_runs_in(&ws.join("repo")).is_empty()).then_some(())
    })
    .await;
    armed(&user, &job).await;
    user.cancel_job(&job.id, None).await.unwrap();
    let done = until_done(&user, &job).await;
    assert_eq!(done.status, JobState::Cancelled);
    assert!(
        ws.join("repo/got-sigterm.txt").is_file(),
        "the agent in the box got no SIGTERM: {:#?}",
        said(&user, &job).await
    );
    let stopped = step_cancelled(&user, &job).await;
    assert_eq!(stopped["killed"], false, "{stopped}");

    // One deaf to SIGTERM is waited for through the grace period (1 s here), then killed:
    // the box does not end it sooner by dying first.
    let job = m
        .submit(
            &user,
            "@fake ignore-term\n@fake say started\n@fake sleep 60",
        )
        .await;
    armed(&user, &job).await;
    user.cancel_job(&job.id, None).await.unwrap();
    assert_eq!(until_done(&user, &job).await.status, JobState::Cancelled);
    let stopped = step_cancelled(&user, &job).await;
    assert_eq!(stopped["killed"], true, "{stopped}");
    assert!(stopped["stopMs"].as_u64().unwrap_or(0) >= 900, "{stopped}");
}

/// Waits until the agent of `job` said `started`, which it says once its handler is set.
async fn armed(user: &QueueClient, job: &Job) {
    wait_for("the agent to be armed", async || {
        let events = said(user, job).await;
        events.iter().any(|e| e.ends_with("started")).then_some(())
    })
    .await;
}

/// The payload of `job`'s `task.step.cancelled`.
async fn step_cancelled(user: &QueueClient, job: &Job) -> serde_json::Value {
    let events = user.list_events(&job.id, None, Some(500)).await.unwrap();
    events
        .into_iter()
        .find(|e| e.kind == contract::job::task::STEP_CANCELLED)
        .map(|e| serde_json::Value::Object(e.payload))
        .expect("a task.step.cancelled")
}

#[tokio::test]
async fn a_worker_killed_mid_step_leaves_nothing_of_its_box_running() {
    let m = Machine::new();
    let workdir = m.root().join("worker-work");
    let planted = probe::plant(m.root(), &workdir.join("jobs"));
    let served = m.serve_alone();
    let mut worker = m.worker(&served.url, &workdir, &planted);
    let user = admin(&served);
    let job = m.submit(&user, STUBBORN).await;
    let ws = workdir.join("jobs").join(job.id.to_string());
    wait_for("the step to start its children", async || {
        (anything_runs_in(&ws.join("repo")).len() >= 3).then_some(())
    })
    .await;
    worker.0.kill().unwrap();
    worker.0.wait().unwrap();
    // --die-with-parent, and the guard behind it: at once, not at a lease's end.
    wait_up_to(Duration::from_secs(10), "the box to be gone", async || {
        anything_runs_in(&ws).is_empty().then_some(())
    })
    .await;
}
