//! Webhooks, posted for real to a receiver written apart from stepwise
//! (`fixtures/webhook_receiver.py`, which checks each signature with Python's own hmac):
//! a job's end to the server's webhooks (JSON and Slack) and to the task's own, its wait for
//! approval, retries with backoff, a refusal, and what each attempt left on the job. On
//! SQLite and on PostgreSQL.

use std::time::{Duration, Instant};

use contract::JobEvent;
use contract::job::events;
use queue::{ClaimRequest, Fence, Queue, QueueConfig};
use serde_json::{Value, json};
use stepwise::testing::site::{Backend, TestDb};
use stepwise::webhooks::{Format, Target, WebhookConfig, WebhookService, inbox};

use common::receiver::Receiver;

mod common;

const SECRET: &str = "a-webhook-secret-of-some-length";
/// The tasks' webhooks are signed with a key of their own.
const TASK_SECRET: &str = "a-key-for-the-tasks-webhooks";

struct Setup {
    queue: Queue,
    _dir: tempfile::TempDir,
    _db: TestDb,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn setup(backend: Backend, config: WebhookConfig) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::new(backend).await;
    let database = match &db.url {
        Some(url) => queue::Database::open_url(url).await.unwrap(),
        None => queue::Database::open_data_dir(dir.path()).await.unwrap(),
    };
    let (observer, ended) = inbox();
    let mut queue_config = QueueConfig::new(dir.path().join("artifacts"));
    queue_config.observers = vec![observer];
    let queue = Queue::open(database, queue_config).await.unwrap();
    queue.migrate().await.unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    WebhookService::new(config, queue.clone(), ended)
        .start(stop.clone())
        .await;
    Setup {
        queue,
        _dir: dir,
        _db: db,
        stop,
    }
}

/// Fast retries, signed with [`SECRET`], posting to `targets` and to the tasks' own
/// webhooks (signed with [`TASK_SECRET`]).
fn config(targets: Vec<Target>) -> WebhookConfig {
    WebhookConfig {
        targets,
        secret: Some(SECRET.into()),
        task_webhooks: true,
        task_secret: Some(TASK_SECRET.into()),
        public_url: Some("http://dash.example:3000".into()),
        attempts: 3,
        backoff: Duration::from_millis(100),
        ..WebhookConfig::new()
    }
}

/// A task (publish `pr`, approval as given) that names `own` as its webhook, claimed.
async fn claimed(queue: &Queue, own: Option<&str>, approval: &str) -> (contract::Job, Fence) {
    let mut task = json!({
        "instructions": "Add a README\nwith care",
        "runtime": { "mode": "claude", "model": "claude-sonnet-4-5" },
        "publish": { "mode": "pr", "approval": approval },
        "steps": [{ "instructions": "write it" }],
    });
    if let Some(url) = own {
        task["notify"] = json!({ "webhookUrl": url });
    }
    let raw = json!({ "type": "task", "payload": { "repository": "octo/hello", "task": task } });
    queue.create_job(&raw, Some("alice")).await.unwrap();
    let request = ClaimRequest {
        worker_id: "w1".into(),
        capabilities: vec!["claude".into(), "git".into(), "gh".into()],
        allowed_types: None,
        allowed_repositories: None,
        lease: Duration::from_secs(60),
        max_running_per_repository: None,
    };
    let job = queue.claim(&request).await.unwrap().expect("the job");
    let fence = Fence::of(&job).unwrap();
    (job, fence)
}

/// The job's notification events, once there are `n`.
async fn notifications(queue: &Queue, job: &contract::Job, n: usize) -> Vec<JobEvent> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found: Vec<JobEvent> = queue
            .list_events(&job.id, 0, 1000)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind.starts_with("job.notification_"))
            .collect();
        if found.len() >= n {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{n} notifications never came: {found:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_job_s_end_reaches_every_webhook_signed(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), SECRET, &[]);
    let tasks_receiver = Receiver::start(dir.path(), TASK_SECRET, &[]);
    let targets = vec![
        Target {
            url: format!("{}/server/T0SECRETPATH", receiver.url),
            format: Format::Json,
        },
        Target {
            url: format!("{}/slack/T1SECRETPATH", receiver.url),
            format: Format::Slack,
        },
    ];
    let s = setup(backend, config(targets)).await;
    let own = format!("{}/task/T2SECRETPATH?token=abc", tasks_receiver.url);
    let (job, fence) = claimed(&s.queue, Some(&own), "none").await;
    let result = json!({ "mode": "pr", "status": "pr_created", "branch": "task/readme",
        "commit": "abc123", "prUrl": "https://github.com/octo/hello/pull/7" });
    s.queue
        .add_artifact(
            &job.id,
            &fence,
            "publish_result.json",
            "application/json",
            result.to_string().as_bytes(),
        )
        .await
        .unwrap();
    s.queue
        .complete(&job.id, &fence, Some("wrote the README".into()))
        .await
        .unwrap();

    let events = notifications(&s.queue, &job, 3).await;
    let posts: Vec<Value> = receiver
        .posts()
        .into_iter()
        .chain(tasks_receiver.posts())
        .collect();
    assert_eq!(posts.len(), 3, "{posts:#?}");
    for post in &posts {
        assert_eq!(post["verified"], true, "{post}");
        assert_eq!(post["event"], "job.ended");
    }
    let json_post = |path: &str| {
        posts
            .iter()
            .find(|p| p["path"].as_str().unwrap().starts_with(path))
            .unwrap_or_else(|| panic!("nothing posted to {path}: {posts:#?}"))
    };
    let body = &json_post("/server/")["body"];
    assert_eq!(body["event"], "job.ended");
    assert_eq!(body["deliveryId"], json_post("/server/")["delivery"]);
    let told = &body["job"];
    assert_eq!(told["id"], job.id.to_string());
    assert_eq!(told["state"], "succeeded");
    assert_eq!(told["title"], "Add a README");
    assert_eq!(told["repository"], "octo/hello");
    assert_eq!(told["runtime"], "claude");
    assert_eq!(told["model"], "claude-sonnet-4-5");
    assert_eq!(told["summary"], "wrote the README");
    assert_eq!(told["pullRequest"], "https://github.com/octo/hello/pull/7");
    assert_eq!(told["branch"], "task/readme");
    assert!(told["durationSeconds"].as_f64().unwrap() >= 0.0, "{told}");
    assert_eq!(
        told["url"],
        format!("http://dash.example:3000/tasks/queue/{}", job.id)
    );
    assert_eq!(
        json_post("/task/")["body"]["job"],
        *told,
        "the task's own webhook hears the same"
    );
    let slack = json_post("/slack/")["body"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(slack.contains("*Add a README* succeeded"), "{slack}");
    assert!(
        slack.contains("<https://github.com/octo/hello/pull/7|pull request>"),
        "{slack}"
    );

    // Each delivery is on the job; no address's secret part is.
    assert!(
        events
            .iter()
            .all(|e| e.kind == events::JOB_NOTIFICATION_DELIVERED),
        "{events:#?}"
    );
    for event in &events {
        let text = format!(
            "{} {}",
            event.message,
            serde_json::Value::Object(event.payload.clone())
        );
        assert!(
            !text.contains("SECRETPATH") && !text.contains("token=abc"),
            "{text}"
        );
        assert!(
            event.message.starts_with("notified http://127.0.0.1:"),
            "{}",
            event.message
        );
    }
}

#[tokio::test]
async fn a_job_s_end_reaches_every_webhook_signed_on_sqlite() {
    a_job_s_end_reaches_every_webhook_signed(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_job_s_end_reaches_every_webhook_signed_on_postgres() {
    a_job_s_end_reaches_every_webhook_signed(Backend::Postgres).await;
}

#[tokio::test]
async fn a_receiver_that_is_down_is_tried_again_with_the_same_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), SECRET, &[503, 503]);
    let target = Target {
        url: receiver.url.clone(),
        format: Format::Json,
    };
    let s = setup(Backend::Sqlite, config(vec![target])).await;
    let (job, fence) = claimed(&s.queue, None, "none").await;
    s.queue
        .fail(&job.id, &fence, "the step failed".into(), false)
        .await
        .unwrap();
    let events = notifications(&s.queue, &job, 3).await;
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            events::JOB_NOTIFICATION_FAILED,
            events::JOB_NOTIFICATION_FAILED,
            events::JOB_NOTIFICATION_DELIVERED
        ]
    );
    assert!(
        events[0]
            .message
            .contains("it answered 503; trying again in 0.1 s (attempt 1 of 3)"),
        "{}",
        events[0].message
    );
    assert_eq!(events[0].payload["retrying"], true);
    let posts = receiver.posts();
    assert_eq!(posts.len(), 3);
    assert!(
        posts.iter().all(|p| p["delivery"] == posts[0]["delivery"]),
        "{posts:#?}"
    );
    assert_eq!(posts[2]["body"]["job"]["state"], "failed");
    assert_eq!(posts[2]["body"]["job"]["error"], "the step failed");
}

#[tokio::test]
async fn a_refusal_is_not_tried_again_a_rejection_is_an_end_and_an_unsigned_post_is_never_made() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), SECRET, &[400]);
    let target = Target {
        url: receiver.url.clone(),
        format: Format::Json,
    };
    let s = setup(Backend::Sqlite, config(vec![target])).await;
    let (job, fence) = claimed(&s.queue, None, "required").await;
    // Waiting for approval is news too.
    s.queue.request_approval(&job.id, &fence).await.unwrap();
    let events = notifications(&s.queue, &job, 1).await;
    assert_eq!(events[0].kind, events::JOB_NOTIFICATION_FAILED);
    assert!(
        events[0]
            .message
            .contains("it answered 400; not tried again"),
        "{}",
        events[0].message
    );
    assert_eq!(events[0].payload["retrying"], false);
    let posts = receiver.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0]["event"], "job.awaiting_approval");
    assert_eq!(posts[0]["body"]["job"]["state"], "awaiting_approval");
    // Rejected at the gate, the job has ended: that is news too.
    s.queue
        .reject(&job.id, Some("bob"), Some("not like this".into()))
        .await
        .unwrap();
    let events = notifications(&s.queue, &job, 2).await;
    assert_eq!(
        events[1].kind,
        events::JOB_NOTIFICATION_DELIVERED,
        "{events:#?}"
    );
    let posts = receiver.posts();
    assert_eq!(posts[1]["event"], "job.ended");
    assert_eq!(posts[1]["verified"], true);
    assert_eq!(posts[1]["body"]["job"]["state"], "failed");
    assert_eq!(
        posts[1]["body"]["job"]["error"],
        "rejected by bob: not like this"
    );

    // With no key for the tasks' webhooks nothing is posted to them, and the job says what
    // to set; with task webhooks off (the default), it says so.
    for (config, why) in [
        (
            WebhookConfig {
                task_secret: None,
                ..config(Vec::new())
            },
            "set --task-webhook-secret (STEPWISE_TASK_WEBHOOK_SECRET)",
        ),
        (
            WebhookConfig {
                task_webhooks: false,
                ..config(Vec::new())
            },
            "this server posts to no task's webhook (--task-webhooks)",
        ),
    ] {
        let unsigned = setup(Backend::Sqlite, config).await;
        let (job, fence) = claimed(&unsigned.queue, Some(&receiver.url), "none").await;
        unsigned
            .queue
            .complete(&job.id, &fence, None)
            .await
            .unwrap();
        let events = notifications(&unsigned.queue, &job, 1).await;
        assert_eq!(events[0].kind, events::JOB_NOTIFICATION_FAILED);
        assert!(events[0].message.contains(why), "{}", events[0].message);
        assert_eq!(events[0].payload["attempt"], 0);
    }
    assert_eq!(receiver.posts().len(), 2, "nothing more was posted");
}

#[tokio::test]
async fn a_task_s_webhook_must_be_an_http_address() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(
        queue::Database::open_data_dir(dir.path()).await.unwrap(),
        QueueConfig::new(dir.path().join("artifacts")),
    )
    .await
    .unwrap();
    queue.migrate().await.unwrap();
    for (url, why) in [
        (
            "ftp://example.com/x",
            "must be an http:// or https:// address",
        ),
        ("http:///nohost", "must be an address with a host"),
        ("https://example.com/a b", "no spaces"),
        (
            "https://user:pw@example.com/x",
            "must not hold a user or password",
        ),
    ] {
        let raw = json!({ "type": "task", "payload": { "repository": "octo/hello", "task": {
            "instructions": "x", "notify": { "webhookUrl": url } } } });
        let Err(queue::QueueError::Invalid(errors)) = queue.create_job(&raw, None).await else {
            panic!("{url} was taken")
        };
        assert_eq!(errors[0].path, "task.notify.webhookUrl", "{url}");
        assert!(
            errors[0].message.contains(why),
            "{url}: {}",
            errors[0].message
        );
    }
    let raw = json!({ "type": "task", "payload": { "repository": "octo/hello", "task": {
        "instructions": "x", "notify": { "webhookUrl": "https://example.com/hook", "extra": 1 } } } });
    let Err(queue::QueueError::Invalid(errors)) = queue.create_job(&raw, None).await else {
        panic!("an unknown field was taken")
    };
    assert_eq!(errors[0].path, "task.notify.extra");
}

async fn a_budget_reached_is_posted_with_the_budget_and_what_was_used(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path(), SECRET, &[]);
    let targets = vec![
        Target {
            url: format!("{}/server/json", receiver.url),
            format: Format::Json,
        },
        Target {
            url: format!("{}/slack/text", receiver.url),
            format: Format::Slack,
        },
    ];
    let s = setup(backend, config(targets)).await;
    let raw = json!({ "type": "task", "payload": { "repository": "octo/hello", "task": {
        "instructions": "Spend a little",
        "runtime": { "mode": "claude" },
        "publish": { "mode": "none" },
        "budget": { "maxCostUsd": 0.5 },
    } } });
    s.queue.create_job(&raw, Some("alice")).await.unwrap();
    let request = ClaimRequest {
        worker_id: "w1".into(),
        capabilities: vec!["claude".into(), "git".into()],
        allowed_types: None,
        allowed_repositories: None,
        lease: Duration::from_secs(60),
        max_running_per_repository: None,
    };
    let job = s.queue.claim(&request).await.unwrap().expect("the job");
    let fence = Fence::of(&job).unwrap();
    let payload = json!({ "stepIndex": 0, "stepId": "step-1", "usage": { "outputTokens": 9, "costUsd": 0.75 } });
    let event = contract::NewEvent {
        kind: contract::job::task::STEP_FINISHED.into(),
        payload: payload.as_object().cloned().unwrap(),
        ..contract::NewEvent::default()
    };
    s.queue.append_event(&job.id, &fence, event).await.unwrap();

    notifications(&s.queue, &job, 2).await;
    let posts = receiver.posts();
    assert_eq!(posts.len(), 2, "{posts:#?}");
    let json_post = posts
        .iter()
        .find(|p| p["path"] == "/server/json")
        .expect("the JSON post");
    assert_eq!(json_post["verified"], true);
    assert_eq!(json_post["event"], "job.budget_exceeded");
    let told = &json_post["body"]["job"];
    assert_eq!(told["state"], "running");
    assert_eq!(told["budget"], json!({ "maxCostUsd": 0.5 }));
    assert_eq!(told["costUsd"], 0.75);
    let slack = posts.iter().find(|p| p["path"] == "/slack/text").unwrap();
    let text = slack["body"]["text"].as_str().unwrap();
    assert!(
        text.contains("*Spend a little* reached its budget and pauses"),
        "{text}"
    );
}

#[tokio::test]
async fn a_budget_reached_is_posted_with_the_budget_and_what_was_used_on_sqlite() {
    a_budget_reached_is_posted_with_the_budget_and_what_was_used(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_budget_reached_is_posted_with_the_budget_and_what_was_used_on_postgres() {
    a_budget_reached_is_posted_with_the_budget_and_what_was_used(Backend::Postgres).await;
}
