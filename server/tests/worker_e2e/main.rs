//! The worker's claim loop against the real API over a real socket: jobs submitted by a
//! user run through the scripted agent and end succeeded, or cancelled on request.

use std::time::{Duration, Instant};

use contract::job::task;
use contract::{Job, JobState};
use queue::Role;
use serde_json::json;
use worker::client::QueueClient;
use worker::runner::{HANDED_BACK, Shutdown, WorkerConfig, run};
use worker::testing::{alive, remote, stage_config};

use stepwise::testing::server::{TestServer, start};

mod budget;
mod course;
mod hung;
mod lease;
mod limits;
mod loops;
mod next;
mod rounds;

struct Setup {
    server: TestServer,
    user: QueueClient,
    remote: String,
    shutdown: Shutdown,
    tmp: tempfile::TempDir,
}

async fn setup() -> Setup {
    setup_with(|_| {}).await
}

async fn setup_with(tweak: impl FnOnce(&mut WorkerConfig)) -> Setup {
    let server = start().await;
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    for skill in ["speckit", "lint", "docs"] {
        let dir = tmp.path().join("skills").join(skill);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), format!("# {skill}\n")).unwrap();
    }
    let stages = stage_config(tmp.path());
    let mut config = WorkerConfig::new(stages);
    config.claim_wait = Duration::from_secs(2);
    tweak(&mut config);
    let shutdown = Shutdown::default();
    tokio::spawn(run(
        server.worker("e2e-worker").await,
        config,
        shutdown.clone(),
    ));
    let user = server.user(Role::Operator).await;
    Setup {
        server,
        user,
        remote,
        shutdown,
        tmp,
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.stop.cancel();
        self.shutdown.hand_back.cancel();
    }
}

impl Setup {
    async fn submit(&self, steps: serde_json::Value) -> Job {
        self.submit_task(
            json!({ "instructions": "Greet", "steps": steps }),
            json!({}),
        )
        .await
    }

    /// Submits `task` (runtime claude and publish none unless it says otherwise) with
    /// `extra` merged into the payload.
    async fn submit_task(&self, mut task: serde_json::Value, extra: serde_json::Value) -> Job {
        let fields = task.as_object_mut().unwrap();
        fields
            .entry("runtime")
            .or_insert(json!({ "mode": "claude" }));
        fields.entry("publish").or_insert(json!({ "mode": "none" }));
        let mut payload = json!({ "repository": self.remote, "task": task });
        for (key, value) in extra.as_object().unwrap() {
            payload[key] = value.clone();
        }
        self.user
            .create_job(&json!({ "payload": payload }))
            .await
            .unwrap()
    }

    /// Every artifact of the job, by name, as the API serves it.
    async fn artifacts(&self, job: &Job) -> Vec<(String, String)> {
        worker::testing::artifacts(&self.user, &job.id).await
    }

    fn artifact<'a>(artifacts: &'a [(String, String)], name: &str) -> &'a str {
        artifacts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, body)| body.as_str())
            .unwrap_or_else(|| panic!("no artifact {name}"))
    }

    async fn until(
        &self,
        job: &Job,
        what: &str,
        done: impl Fn(&Job, &[String]) -> bool,
    ) -> (Job, Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let current = self.user.get_job(&job.id).await.unwrap();
            let events = self
                .user
                .list_events(&job.id, None, Some(500))
                .await
                .unwrap();
            let kinds: Vec<String> = events
                .iter()
                .map(|e| format!("{} {}", e.kind, e.message))
                .collect();
            if done(&current, &kinds) {
                return (current, kinds);
            }
            assert!(
                Instant::now() < deadline,
                "{what} never happened: {current:?} {kinds:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn a_submitted_task_runs_on_the_worker_and_succeeds() {
    let s = setup().await;
    let job = s
        .submit(json!([
            { "instructions": "@fake write hello.txt hello" },
            { "instructions": "@fake say all good" },
        ]))
        .await;
    let (done, kinds) = s
        .until(&job, "success", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(done.result_summary.as_deref(), Some("publish skipped"));
    for kind in [
        task::STEPS_PLAN,
        task::STEP_STARTED,
        task::STEP_FINISHED,
        task::STAGE_FINISHED,
    ] {
        assert!(
            kinds.iter().any(|k| k.starts_with(kind)),
            "no {kind}: {kinds:#?}"
        );
    }
    let artifacts: Vec<String> = s
        .user
        .list_artifacts(&job.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    for name in [
        "task_context.json",
        "logs/steps/step-0000.log",
        "patches/steps/step-0000.patch",
        "publish_result.json",
    ] {
        assert!(
            artifacts.contains(&name.to_string()),
            "no {name}: {artifacts:?}"
        );
    }
    // Everything is on the server, so the workspace goes (just after the job's end).
    let workspace = s.tmp.path().join("work").join(job.id.to_string());
    let deadline = Instant::now() + Duration::from_secs(10);
    while workspace.exists() {
        assert!(
            Instant::now() < deadline,
            "{} was kept",
            workspace.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = s.server.url();
}

#[tokio::test]
async fn a_cancel_stops_the_running_step_and_the_job_ends_cancelled() {
    let s = setup().await;
    let job = s
        .submit(json!([
            { "instructions": "@fake ignore-term\n@fake say started\n@fake sleep 60" },
            { "instructions": "@fake write never.txt x" },
        ]))
        .await;
    s.until(&job, "the step starting", |_, kinds| {
        kinds
            .iter()
            .any(|k| k.starts_with(task::STEP_LOG) && k.contains("started"))
    })
    .await;
    let asked = Instant::now();
    s.user
        .cancel_job(&job.id, Some("changed my mind"))
        .await
        .unwrap();
    let (done, kinds) = s
        .until(&job, "the cancel", |j, _| j.status.is_terminal())
        .await;
    let took = asked.elapsed();
    assert_eq!(done.status, JobState::Cancelled, "{done:?} {kinds:#?}");
    assert!(
        kinds.iter().any(|k| k.starts_with(task::STEP_CANCELLED)),
        "{kinds:#?}"
    );
    assert!(
        !kinds.iter().any(|k| k.contains("step 2/2")),
        "the second step ran: {kinds:#?}"
    );
    // Reported, not asserted tightly (the stop includes the 300 ms grace before SIGKILL).
    // The bound still tells the event stream from the heartbeat: with a 60 s lease the
    // first heartbeat, the only other way the worker hears of the cancel, comes at 20 s.
    eprintln!("cancel request → job cancelled: {took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
}

#[tokio::test]
async fn a_three_step_task_runs_each_step_once_in_order_and_opens_one_pull_request() {
    let s = setup().await;
    let publish_token = s.tmp.path().join("publish-token");
    std::fs::write(&publish_token, "pr-token-from-a-file\n").unwrap();
    let job = s
        .submit_task(
            json!({
                "instructions": "Count to three",
                "skill": { "id": "speckit" },
                "publish": { "mode": "pr", "prTitle": "Count" },
                "steps": [
                    { "instructions": "@fake write count.txt one" },
                    { "instructions": "@fake write count.txt two", "skill": { "id": "lint" } },
                    { "instructions": "@fake write count.txt three", "skill": { "id": "auto" } },
                ],
            }),
            json!({ "auth": { "publishAuthRef": format!("file://{}", publish_token.display()) } }),
        )
        .await;
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(
        done.result_summary.as_deref(),
        Some("pull request https://github.com/octo/hello/pull/7")
    );
    let started: Vec<&String> = kinds
        .iter()
        .filter(|k| k.starts_with(task::STEP_STARTED))
        .collect();
    assert_eq!(started.len(), 3, "{kinds:#?}");
    let publish_started = format!("{} {}", task::STAGE_STARTED, task::STAGE_PUBLISH);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with(&publish_started))
            .count(),
        1,
        "{kinds:#?}"
    );
    let gh_log = std::fs::read_to_string(s.tmp.path().join("gh.log")).unwrap();
    assert_eq!(gh_log.matches("pr create").count(), 1, "{gh_log}");
    assert!(gh_log.contains("--title Count"), "{gh_log}");
    // The resolved publishAuthRef authenticated gh, through its environment.
    assert!(
        gh_log.contains("GH_TOKEN=pr-token-from-a-file\n"),
        "{gh_log}"
    );

    // Each invocation appended its line, so the pushed file shows all three, in order.
    let artifacts = s.artifacts(&job).await;
    let context: serde_json::Value =
        serde_json::from_str(Setup::artifact(&artifacts, task::TASK_CONTEXT)).unwrap();
    let branch = context["git"]["workingBranch"].as_str().unwrap();
    let pushed = worker::testing::run(
        std::path::Path::new(&s.remote),
        &["show", &format!("{branch}:count.txt")],
    );
    assert_eq!(pushed, "one\ntwo\nthree");
    // The skills union: the task's skill and every non-auto step skill, once each.
    assert_eq!(context["skills"], json!(["speckit", "lint"]));
    for step in 0..3 {
        Setup::artifact(&artifacts, &task::step_log(step));
        Setup::artifact(&artifacts, &task::step_patch(step));
    }
    let result: serde_json::Value =
        serde_json::from_str(Setup::artifact(&artifacts, task::PUBLISH_RESULT)).unwrap();
    assert_eq!(result["status"], "pr_created");
}

#[tokio::test]
async fn a_task_without_steps_runs_its_objective_as_one_step() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({ "instructions": "@fake write solo.txt alone\n@fake say only step" }),
            json!({}),
        )
        .await;
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    let events = s.user.list_events(&job.id, None, Some(500)).await.unwrap();
    let plan = events
        .iter()
        .find(|e| e.kind == task::STEPS_PLAN)
        .expect("a plan");
    assert_eq!(plan.payload["count"], 1);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with(task::STEP_STARTED))
            .count(),
        1
    );
    let artifacts = s.artifacts(&job).await;
    assert!(Setup::artifact(&artifacts, &task::step_patch(0)).contains("+alone"));
}

#[tokio::test]
async fn a_failed_step_fails_the_job_runs_nothing_after_it_and_publishes_nothing() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Try",
                "publish": { "mode": "branch" },
                "steps": [
                    { "instructions": "@fake write a.txt first" },
                    { "instructions": "@fake fail 3" },
                    { "instructions": "@fake write never.txt x" },
                ],
            }),
            json!({}),
        )
        .await;
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Failed, "{done:?} {kinds:#?}");
    assert!(
        kinds.iter().any(|k| k.starts_with(task::STEP_FAILED)),
        "{kinds:#?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with(task::STEP_STARTED))
            .count(),
        2,
        "the third step must not start: {kinds:#?}"
    );
    assert!(
        !kinds.iter().any(|k| k.contains(task::STAGE_PUBLISH)),
        "{kinds:#?}"
    );
    // A failed job's workspace is kept to look into.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        s.tmp
            .path()
            .join("work")
            .join(job.id.to_string())
            .join("repo")
            .is_dir()
    );
    let branches = worker::testing::run(std::path::Path::new(&s.remote), &["branch"]);
    assert!(
        !branches.contains("task/"),
        "a branch was pushed: {branches}"
    );
    let artifacts = s.artifacts(&job).await;
    assert!(
        !artifacts.iter().any(|(n, _)| n == task::PUBLISH_RESULT),
        "{:?}",
        artifacts.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_stubborn_agent_and_its_children_are_gone_after_a_cancel() {
    let s = setup().await;
    let pidfile = s.tmp.path().join("child.pid");
    let job = s
        .submit(json!([{ "instructions": format!(
            "@fake ignore-term\n@fake spawn-child {}\n@fake say started\n@fake sleep 60",
            pidfile.display()
        ) }]))
        .await;
    s.until(&job, "the step starting", |_, kinds| {
        kinds
            .iter()
            .any(|k| k.starts_with(task::STEP_LOG) && k.contains("started"))
    })
    .await;
    let child: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(child));
    s.user.cancel_job(&job.id, None).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the cancel", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Cancelled, "{done:?} {kinds:#?}");
    assert!(
        !alive(child),
        "the agent's child {child} survived the cancel"
    );
    assert!(
        !kinds.iter().any(|k| k.starts_with(task::STEP_FINISHED)
            || k.starts_with(contract::job::events::JOB_COMPLETED)),
        "{kinds:#?}"
    );
}

#[tokio::test]
async fn a_secret_from_an_auth_ref_is_redacted_from_every_event_and_artifact() {
    let s = setup().await;
    // Not a known token shape: only resolving the ref lets the worker know to hide it.
    let secret = "correct-horse-battery-staple-4821";
    let file = s.tmp.path().join("repo-secret");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let job = s
        .submit_task(
            json!({
                "instructions": "Leak it",
                "steps": [{ "instructions": format!(
                    "@fake say the key is {secret}\n@fake write notes.txt {secret}"
                ) }],
            }),
            json!({ "auth": { "repoAuthRef": format!("file://{}", file.display()) } }),
        )
        .await;
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    let events = s.user.list_events(&job.id, None, Some(500)).await.unwrap();
    let events = serde_json::to_string(&events).unwrap();
    assert!(!events.contains(secret), "{events}");
    assert!(events.contains("[REDACTED]"), "{events}");
    let artifacts = s.artifacts(&job).await;
    assert!(artifacts.len() >= 6, "{artifacts:?}");
    for (name, body) in &artifacts {
        assert!(!body.contains(secret), "{name}: {body}");
    }
    assert!(Setup::artifact(&artifacts, &task::step_patch(0)).contains("[REDACTED]"));
}

#[tokio::test]
async fn a_worker_that_stops_hands_back_the_job_it_could_not_finish() {
    let s = setup_with(|config| config.drain = Duration::from_millis(300)).await;
    let job = s
        .submit(json!([{ "instructions": "@fake say started\n@fake sleep 60" }]))
        .await;
    s.until(&job, "the step starting", |_, kinds| {
        kinds
            .iter()
            .any(|k| k.starts_with(task::STEP_LOG) && k.contains("started"))
    })
    .await;
    s.shutdown.stop.cancel();
    let (back, kinds) = s
        .until(&job, "the hand-back", |j, _| j.status == JobState::Queued)
        .await;
    assert_eq!(back.error_message.as_deref(), Some(HANDED_BACK), "{back:?}");
    assert_eq!(back.attempt, 1);
    assert!(back.claimed_by.is_none(), "{back:?}");
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with(contract::job::events::JOB_RETRY_SCHEDULED)),
        "{kinds:#?}"
    );
}
