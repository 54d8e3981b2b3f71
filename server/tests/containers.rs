//! Container tasks for real, with Podman from Debian: `stepwise serve`'s embedded worker
//! (and a standalone `stepwise worker`) offers `docker` once the engine answers, runs the
//! task's command in its image with the checkout mounted at the workdir, collects what it
//! wrote under `$ARTIFACT_DIR`, and publishes as any task; a failing command, a timeout and
//! a cancel end the job and leave no container; a worker killed mid-run has its container
//! removed when it starts again. The image is built here (`podman import` of a busybox
//! root file system): no registry is reachable.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use contract::{Job, JobState};
use serde_json::{Value, json};
use worker::client::QueueClient;

use common::{BIN, Process, artifact, wait_for};

mod common;

const IMAGE: &str = "localhost/stepwise-test-busybox:1";

/// The engine's settings these machines need (see AGENT_CLIS.md), without touching /etc.
fn containers_conf() -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("containers.conf");
    std::fs::write(
        &path,
        "[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n",
    )
    .unwrap();
    path
}

fn podman(args: &[&str]) -> String {
    let out = Command::new("podman")
        .args(args)
        .env("CONTAINERS_CONF", containers_conf())
        .output()
        .expect("podman is installed (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The test image: busybox's programs, imported once per run of this binary.
fn image() -> &'static str {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let fs = root.path().join("rootfs");
        for dir in ["bin", "tmp", "etc", "root"] {
            std::fs::create_dir_all(fs.join(dir)).unwrap();
        }
        std::fs::copy("/usr/bin/busybox", fs.join("bin/busybox"))
            .expect("busybox-static is installed (scripts/setup.sh installs it)");
        let applets = [
            "sh", "ls", "cat", "echo", "sleep", "mkdir", "env", "pwd", "touch", "printf", "wc",
            "ln",
        ];
        for applet in applets {
            std::os::unix::fs::symlink("busybox", fs.join("bin").join(applet)).unwrap();
        }
        std::fs::write(fs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        let tar = root.path().join("rootfs.tar");
        let made = Command::new("tar")
            .arg("-C")
            .arg(&fs)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .unwrap();
        assert!(made.success());
        podman(&["import", tar.to_str().unwrap(), IMAGE]);
    });
    IMAGE
}

/// Containers of job `job`, running or not.
fn containers_of(job: &Job) -> Vec<String> {
    let filter = format!("label=stepwise.job={}", job.id);
    let ids = podman(&["ps", "-a", "-q", "--filter", &filter]);
    ids.split_whitespace().map(String::from).collect()
}

/// The job's containers that have started: one only created may still be undone when the
/// `podman run` making it dies (as it does with a killed worker), which a slow machine
/// shows.
fn running_containers_of(job: &Job) -> Vec<String> {
    let filter = format!("label=stepwise.job={}", job.id);
    let ids = podman(&[
        "ps",
        "-q",
        "--filter",
        &filter,
        "--filter",
        "status=running",
    ]);
    ids.split_whitespace().map(String::from).collect()
}

struct Machine {
    tmp: tempfile::TempDir,
    remote: String,
}

impl Machine {
    fn new() -> Machine {
        image();
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let remote = worker::testing::remote(tmp.path());
        std::fs::create_dir_all(tmp.path().join("site/pkg")).unwrap();
        Machine { tmp, remote }
    }

    fn data(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    fn worker_env(command: &mut Command) {
        command
            .env("CONTAINERS_CONF", containers_conf())
            .env("RUST_LOG", "warn")
            .args(["--capability", "claude", "--capability", "git"])
            .args(["--capability", "docker", "--grace-seconds", "1"]);
    }

    fn serve(&self, embedded: bool) -> common::Served {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--port", "0", "--data-dir"])
            .arg(self.data())
            .arg("--site-root")
            .arg(self.tmp.path().join("site"))
            .stderr(Stdio::inherit());
        if embedded {
            Machine::worker_env(&mut command);
        } else {
            command.arg("--no-worker").env("RUST_LOG", "warn");
        }
        common::serve(command)
    }

    fn worker(&self, url: &str, name: &str) -> Process {
        let token = common::worker_token(&["--data-dir".as_ref(), self.data().as_os_str()], name);
        let mut command = Command::new(BIN);
        command
            .args(["worker", "--server", url, "--token", &token, "--workdir"])
            .arg(self.tmp.path().join("worker-work"))
            .args(["--lease-seconds", "6"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        Machine::worker_env(&mut command);
        Process(command.spawn().unwrap())
    }

    async fn submit(&self, user: &QueueClient, container: Value, publish: &str) -> Job {
        let mut container = container;
        container["enabled"] = json!(true);
        container["image"] = json!(image());
        user.create_job(&json!({ "payload": {
            "repository": self.remote,
            "task": {
                "instructions": "Run the container",
                "runtime": { "mode": "claude" },
                "publish": { "mode": publish },
                "container": container,
            },
        }}))
        .await
        .unwrap()
    }
}

fn admin(served: &common::Served) -> QueueClient {
    QueueClient::new(&served.url, served.admin.as_ref().unwrap()).unwrap()
}

async fn until_done(user: &QueueClient, job: &Job) -> (Job, Vec<String>) {
    let done = wait_for("the job to end", async || {
        let job = user.get_job(&job.id).await.unwrap();
        job.status.is_terminal().then_some(job)
    })
    .await;
    let events = user
        .list_events(&job.id, None, Some(500))
        .await
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e.kind, e.message))
        .collect();
    (done, events)
}

#[tokio::test]
async fn a_container_task_runs_its_command_in_its_image_and_publishes_the_checkout() {
    let m = Machine::new();
    let served = m.serve(true);
    let user = admin(&served);
    // Links among its artifacts lead the worker nowhere: one at the run.json the worker
    // writes, one at a file of the worker's machine.
    let victim = m.tmp.path().join("worker-file.txt");
    std::fs::write(&victim, "the worker's own\n").unwrap();
    let script = format!(
        "echo \"$GREETING from $(pwd)\" > made-in-container.txt; \
         mkdir -p \"$ARTIFACT_DIR/reports\" \"$ARTIFACT_DIR/metadata\"; \
         echo report > \"$ARTIFACT_DIR/reports/r.txt\"; \
         echo \"$JOB_ID\" > \"$ARTIFACT_DIR/job.txt\"; \
         ln -s {victim} \"$ARTIFACT_DIR/metadata/run.json\"; ln -s {victim} \"$ARTIFACT_DIR/link\"; \
         touch .git/planted 2>/dev/null && echo GIT-$((40+2)); echo done in the container",
        victim = victim.display()
    );
    let job = m
        .submit(
            &user,
            json!({
                "command": ["sh", "-c", script],
                "workdir": "/src",
                "env": { "GREETING": "hello" },
                "artifactsSubdir": "out",
                "timeoutSeconds": 60,
                "resources": { "cpus": "1", "memory": "256m" },
                "cacheVolumes": [{ "name": "stepwise-test-cache", "target": "/cache" }],
            }),
            "branch",
        )
        .await;
    let (done, said) = until_done(&user, &job).await;
    assert_eq!(done.status, JobState::Succeeded, "{said:#?}");
    let artifacts = worker::testing::artifacts(&user, &job.id).await;
    assert_eq!(artifact(&artifacts, "out/reports/r.txt"), "report\n");
    assert_eq!(artifact(&artifacts, "out/job.txt"), format!("{}\n", job.id));
    assert!(
        !artifacts.iter().any(|(n, _)| n == "out/link"),
        "a link was collected"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the worker's own\n"
    );
    let run: Value = serde_json::from_str(artifact(&artifacts, "out/metadata/run.json")).unwrap();
    assert_eq!(run["exitCode"], 0, "{run}");
    assert_eq!(run["image"], IMAGE);
    assert_eq!(run["timedOut"], false);
    let log = artifact(&artifacts, "logs/steps/step-0000.log");
    assert!(log.contains("done in the container"), "{log}");
    assert!(
        !log.contains("GIT-42"),
        "the container wrote the checkout's .git: {log}"
    );
    assert!(
        said.iter()
            .any(|l| l == "task.step.log done in the container"),
        "{said:#?}"
    );
    // Published as any task: the file is on the job's branch.
    let context: Value =
        serde_json::from_str(artifact(&artifacts, contract::job::task::TASK_CONTEXT)).unwrap();
    let branch = context["git"]["workingBranch"].as_str().unwrap();
    let shown = worker::testing::run(
        Path::new(&m.remote),
        &["show", &format!("{branch}:made-in-container.txt")],
    );
    assert_eq!(shown, "hello from /src");
    assert!(containers_of(&job).is_empty(), "the container was left");
}

#[tokio::test]
async fn a_failing_command_a_timeout_and_a_cancel_end_the_job_and_leave_no_container() {
    let m = Machine::new();
    let served = m.serve(true);
    let user = admin(&served);

    let failing = m
        .submit(
            &user,
            json!({ "command": ["sh", "-c", "echo about to fail; exit 3"] }),
            "none",
        )
        .await;
    let (done, said) = until_done(&user, &failing).await;
    assert_eq!(done.status, JobState::Failed, "{said:#?}");
    let error = done.error_message.clone().unwrap_or_default();
    assert!(error.contains("container command failed"), "{error}");
    let artifacts = worker::testing::artifacts(&user, &failing.id).await;
    let run: Value =
        serde_json::from_str(artifact(&artifacts, "container/metadata/run.json")).unwrap();
    assert_eq!(run["exitCode"], 3, "{run}");

    let slow = m
        .submit(
            &user,
            json!({ "command": ["sleep", "120"], "timeoutSeconds": 2 }),
            "none",
        )
        .await;
    let (done, said) = until_done(&user, &slow).await;
    assert_eq!(done.status, JobState::Failed, "{said:#?}");
    let error = done.error_message.clone().unwrap_or_default();
    assert!(error.contains("timed out after 2 s"), "{error}");
    assert!(
        containers_of(&slow).is_empty(),
        "the timed-out container was left"
    );

    let cancelled = m
        .submit(&user, json!({ "command": ["sleep", "120"] }), "none")
        .await;
    wait_for("the container to run", async || {
        (!containers_of(&cancelled).is_empty()).then_some(())
    })
    .await;
    user.cancel_job(&cancelled.id, None).await.unwrap();
    let (done, said) = until_done(&user, &cancelled).await;
    assert_eq!(done.status, JobState::Cancelled, "{said:#?}");
    assert!(
        containers_of(&cancelled).is_empty(),
        "the cancelled container was left"
    );
}

#[tokio::test]
async fn a_killed_worker_s_container_is_removed_when_the_worker_starts_again() {
    let m = Machine::new();
    let served = m.serve(false);
    let user = admin(&served);
    let mut first = m.worker(&served.url, "containers-1");
    let job = m
        .submit(&user, json!({ "command": ["sleep", "300"] }), "none")
        .await;
    let running = wait_for("the container to run", async || {
        let ids = running_containers_of(&job);
        (!ids.is_empty()).then_some(ids)
    })
    .await;
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    assert_eq!(
        containers_of(&job),
        running,
        "the container outlived nothing yet"
    );
    let _second = m.worker(&served.url, "containers-2");
    wait_for("the orphaned container to be removed", async || {
        let now = containers_of(&job);
        (!running.iter().any(|id| now.contains(id))).then_some(())
    })
    .await;
    user.cancel_job(&job.id, None).await.unwrap();
    until_done(&user, &job).await;
    wait_for("no container of the job", async || {
        containers_of(&job).is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_bad_container_setting_is_a_422_naming_the_field() {
    let m = Machine::new();
    let served = m.serve(false);
    let user = admin(&served);
    let refused = user
        .create_job(&json!({ "payload": {
            "repository": m.remote,
            "task": {
                "instructions": "x",
                "container": { "enabled": true, "image": "alpine", "pull": "never",
                               "env": { "JOB_ID": "mine" }, "artifactsSubdir": "../up" },
            },
        }}))
        .await
        .unwrap_err()
        .to_string();
    for part in [
        "task.container.pull",
        "task.container.env.JOB_ID",
        "task.container.artifactsSubdir",
    ] {
        assert!(refused.contains(part), "{part} not in {refused}");
    }
}
