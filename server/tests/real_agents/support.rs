//! What the real-agent tests share: the pinned CLIs, `stepwise serve` started with one
//! runtime's endpoint flags beside a scripted model server, and reading a job back.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use contract::{Job, JobEvent};
use serde_json::{Value, json};
use testkit::ModelServer;
use worker::client::QueueClient;
use worker::testing::alive;

use crate::common::{self, BIN, Process};

/// Where the pinned CLIs are.
pub fn agents_bin() -> PathBuf {
    let bin = std::env::var_os("STEPWISE_AGENTS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../agents/node_modules/.bin")
        });
    for cli in ["codex", "claude", "gemini"] {
        assert!(
            bin.join(cli).exists(),
            "{cli} is not in {}: install the pinned CLIs with `npm ci` in agents/ (scripts/test.sh does)",
            bin.display()
        );
    }
    bin
}

/// One runtime's run: what differs between the three tests.
pub struct Runtime {
    pub mode: &'static str,
    pub model: &'static str,
    pub effort: &'static str,
    /// The worker's flags for this runtime's endpoint, given the model server's URL.
    pub flags: fn(&str) -> Vec<String>,
    /// The variable and value of the API key the worker is started with.
    pub key: (&'static str, &'static str),
    /// Files the CLI writes in its HOME, which must stay out of the checkout (where only
    /// the skill links, kept out of commits, live under .claude/, .gemini/ and .agents/).
    pub home_files: &'static [&'static str],
}

/// The credential the server reads the scripted GitHub with.
pub const GITHUB_TOKEN: &str = "ghs_realAgentsFeedbackToken0123456789";

pub struct Setup {
    pub _serve: Process,
    /// What a hostile step must not reach, planted around the worker (`setup_hostile`).
    pub planted: Option<crate::probe::Planted>,
    pub user: QueueClient,
    pub model: ModelServer,
    /// The scripted GitHub API the server reads pull request feedback from.
    pub github: testkit::github::GitHub,
    pub remote: String,
    pub data: PathBuf,
    pub gh_log: PathBuf,
    pub _tmp: tempfile::TempDir,
    pub runtime: Runtime,
}

/// A worker started with secrets in its environment, on a machine planted with what a
/// step must not reach, and the probe in the task's repository.
pub async fn setup_hostile(runtime: Runtime) -> Setup {
    setup_full(runtime, None, true, env!("CARGO_TARGET_TMPDIR")).await
}

/// A machine whose workspaces, and so each job's HOME, are under /tmp.
pub async fn setup_in_tmp(runtime: Runtime) -> Setup {
    setup_full(
        runtime,
        None,
        false,
        &std::env::temp_dir().to_string_lossy(),
    )
    .await
}

/// With `logins`, files of the worker user's HOME (its CLI logins) and `--share-logins`,
/// and no API key in the environment.
pub async fn setup_with(runtime: Runtime, logins: Option<&[(&str, &str)]>) -> Setup {
    setup_full(runtime, logins, false, env!("CARGO_TARGET_TMPDIR")).await
}

/// `root`: where the machine's folders go; a hostile one's not under /tmp, which a boxed
/// step has of its own (see `sandbox.rs`).
async fn setup_full(
    runtime: Runtime,
    logins: Option<&[(&str, &str)]>,
    hostile: bool,
    root: &str,
) -> Setup {
    let bin = agents_bin();
    let model = ModelServer::start().await;
    let github = testkit::github::GitHub::start(GITHUB_TOKEN).await;
    // The pull request the recorded gh opens; its head is set once the job pushed.
    github.open_pull("octo", "hello", 7, "unknown", "0000000");
    let tmp = tempfile::tempdir_in(root).unwrap();
    let remote = worker::testing::remote(tmp.path());
    let (gh, gh_log) = worker::testing::gh_shim(tmp.path());
    let data = tmp.path().join("data");
    let planted = hostile.then(|| {
        crate::probe::add_probe(tmp.path(), &remote);
        crate::probe::plant(tmp.path(), &data.join("work/jobs"))
    });
    // Named as the pull request the recorded gh opens is of (octo/hello), which the
    // server's feedback reads only of the task's own repository.
    let named = tmp.path().join("octo/hello.git");
    std::fs::create_dir_all(named.parent().unwrap()).unwrap();
    std::fs::rename(&remote, &named).unwrap();
    let remote = named.display().to_string();
    let site = tmp.path().join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    // The worker's user: a HOME of its own, so no login of the machine's is used.
    let user_home = tmp.path().join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    for (file, body) in logins.unwrap_or_default() {
        let at = user_home.join(file);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, body).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(&data)
        .arg("--site-root")
        .arg(&site)
        .args(["--gh-bin"])
        .arg(&gh)
        .args([
            "--capability",
            runtime.mode,
            "--capability",
            "git",
            "--capability",
            "gh",
        ])
        .args(["--grace-seconds", "1", "--keep-workspaces", "always"])
        .args([
            "--github-api-url",
            &github.url(),
            "--github-token",
            GITHUB_TOKEN,
        ])
        .args(["--feedback-poll-seconds", "0.2"])
        .args((runtime.flags)(&model.url()))
        // Only what a worker needs: no API key or setting of the machine's leaks in.
        .env_clear()
        .env("PATH", path)
        .env("HOME", &user_home)
        .env("RUST_LOG", "warn")
        // Settings a user's shell may hold that would override the task's: claude takes
        // this effort over `--effort`, and codex stops at a CODEX_HOME that does not exist.
        // The worker must keep both from its agents.
        .env("CLAUDE_CODE_EFFORT_LEVEL", "max")
        .env("CODEX_HOME", data.join("no-such-codex-home"))
        .stderr(Stdio::inherit());
    match logins {
        Some(_) => command.arg("--share-logins"),
        None => command.env(runtime.key.0, runtime.key.1),
    };
    if hostile {
        // DATABASE_URL would make serve itself use it; the standalone worker's test has it.
        command.envs(
            crate::probe::SECRETS
                .into_iter()
                .filter(|(k, _)| *k != "DATABASE_URL"),
        );
    }
    let served = common::serve(command);
    let user = QueueClient::new(
        &served.url,
        &served.admin.expect("serve printed the first admin token"),
    )
    .unwrap();
    Setup {
        _serve: served.process,
        planted,
        user,
        model,
        github,
        remote,
        data,
        gh_log,
        _tmp: tmp,
        runtime,
    }
}

impl Setup {
    pub async fn submit(&self, task: Value) -> Job {
        let mut task = task;
        task["runtime"] = json!({
            "mode": self.runtime.mode, "model": self.runtime.model, "effort": self.runtime.effort,
        });
        self.user
            .create_job(&json!({ "payload": { "repository": self.remote, "task": task } }))
            .await
            .unwrap()
    }

    pub async fn events(&self, job: &Job) -> Vec<JobEvent> {
        self.user
            .list_events(&job.id, None, Some(1000))
            .await
            .unwrap()
    }

    pub async fn until_done(&self, job: &Job, limit: Duration) -> (Job, Vec<JobEvent>) {
        let deadline = Instant::now() + limit;
        loop {
            let current = self.user.get_job(&job.id).await.unwrap();
            if current.status.is_terminal() {
                return (current, self.events(job).await);
            }
            if Instant::now() > deadline {
                let events: Vec<String> = self
                    .events(job)
                    .await
                    .iter()
                    .map(|e| format!("{} {}", e.kind, e.message))
                    .collect();
                panic!("{job:?} did not end in {limit:?}: {events:#?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn artifacts(&self, job: &Job) -> Vec<(String, String)> {
        worker::testing::artifacts(&self.user, &job.id).await
    }

    pub fn workspace(&self, job: &Job) -> PathBuf {
        self.data.join("work/jobs").join(job.id.to_string())
    }
}

pub use crate::common::artifact;

pub fn step_events<'a>(events: &'a [JobEvent], kind: &str, index: usize) -> Vec<&'a JobEvent> {
    events
        .iter()
        .filter(|e| e.kind == kind && e.payload.get("stepIndex") == Some(&json!(index)))
        .collect()
}

/// The pid of the process whose arguments are exactly `args`, from /proc: the command
/// runs in the CLI's sandbox (codex's has a pid namespace of its own), so the process is
/// found by what it runs rather than by the pid it sees itself.
pub fn find_process(args: &[&str]) -> Option<u32> {
    let wanted: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted) && alive(*pid)
        })
}
