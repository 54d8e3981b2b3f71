//! A webhook notification survives the replica that was posting it: `stepwise serve`, for
//! real, tries a job's end once against a receiver that is down, and is killed (SIGKILL)
//! before its next try; the next replica on the database (on SQLite the same data dir
//! started again, on PostgreSQL another replica) takes the notification from the outbox
//! and delivers it, with the same delivery id, as attempt 2. Its `/metrics` count it.

use std::path::Path;
use std::process::{Command, Stdio};

use contract::JobEvent;
use contract::job::events;
use serde_json::json;
use stepwise::testing::site::{Backend, TestDb};
use worker::client::QueueClient;

use common::receiver::Receiver;
use common::{BIN, Served, wait_for};

mod common;

const SECRET: &str = "a-webhook-secret-of-some-length";

/// `stepwise serve` on `database` (a URL, or the data dir's SQLite), posting every job's
/// end to `webhook`.
fn serve(database: Option<&str>, data: &Path, site: &Path, webhook: &str) -> Served {
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--port", "0", "--no-worker"])
        .arg("--data-dir")
        .arg(data)
        .arg("--site-root")
        .arg(site)
        .args(["--webhook", webhook, "--webhook-secret", SECRET])
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit());
    if let Some(url) = database {
        command.args(["--database-url", url]);
    }
    common::serve(command)
}

async fn notifications(client: &QueueClient, job: &contract::Job) -> Vec<JobEvent> {
    client
        .list_events(&job.id, None, Some(500))
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.starts_with("job.notification_"))
        .collect()
}

async fn a_notification_outlives_the_replica_killed_between_its_tries(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::new(backend).await;
    // Down for the first try, up for the second.
    let receiver = Receiver::start(dir.path(), SECRET, &[503, 200]);
    let site = dir.path().join("site");
    let first = serve(
        db.url.as_deref(),
        &dir.path().join("a"),
        &site,
        &receiver.url,
    );
    let admin = first
        .admin
        .clone()
        .expect("the first replica made an admin token");
    let on_first = QueueClient::new(&first.url, &admin).unwrap();
    let request = json!({ "payload": {
        "repository": "octo/hello",
        "task": { "instructions": "Never runs", "runtime": { "mode": "claude" } },
    }});
    let job = on_first.create_job(&request).await.unwrap();
    // A queued job cancelled ends at once: its end is in the outbox with its event.
    on_first
        .cancel_job(&job.id, Some("ends here"))
        .await
        .unwrap();
    let failed = wait_for("the first try", async || {
        notifications(&on_first, &job)
            .await
            .into_iter()
            .find(|e| e.kind == events::JOB_NOTIFICATION_FAILED)
    })
    .await;
    // Killed at once: its next try was a second away (the default backoff).
    drop(first);
    assert_eq!(failed.payload["attempt"], 1, "{failed:#?}");
    assert_eq!(failed.payload["retrying"], true, "{failed:#?}");
    assert_eq!(
        receiver.posts().len(),
        1,
        "the first replica tried again before it died"
    );

    // On SQLite the same data dir starts again; on PostgreSQL another replica takes over.
    let data = match backend {
        Backend::Sqlite => dir.path().join("a"),
        Backend::Postgres => dir.path().join("b"),
    };
    let second = serve(db.url.as_deref(), &data, &site, &receiver.url);
    let on_second = QueueClient::new(&second.url, &admin).unwrap();
    let delivered = wait_for("the delivery by the next replica", async || {
        notifications(&on_second, &job)
            .await
            .into_iter()
            .find(|e| e.kind == events::JOB_NOTIFICATION_DELIVERED)
    })
    .await;
    assert_eq!(delivered.payload["attempt"], 2, "{delivered:#?}");
    let posts = receiver.posts();
    assert_eq!(posts.len(), 2, "{posts:#?}");
    assert_eq!(posts[0]["delivery"], posts[1]["delivery"], "{posts:#?}");
    assert_eq!(posts[1]["body"]["job"]["state"], "cancelled");
    // Nothing is left to post, and the replica that delivered counts it.
    let http = reqwest::Client::new();
    let metrics = wait_for("the outbox to empty", async || {
        let text = http
            .get(format!("{}/metrics", second.url))
            .bearer_auth(&admin)
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.contains("stepwise_webhook_outbox_pending 0")
            .then_some(text)
    })
    .await;
    assert!(
        metrics.contains(r#"stepwise_webhook_deliveries_total{outcome="delivered"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_notification_outlives_the_replica_killed_between_its_tries_on_sqlite() {
    a_notification_outlives_the_replica_killed_between_its_tries(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_notification_outlives_the_replica_killed_between_its_tries_on_postgres() {
    a_notification_outlives_the_replica_killed_between_its_tries(Backend::Postgres).await;
}
