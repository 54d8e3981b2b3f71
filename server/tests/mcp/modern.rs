//! A 2026-07-28 client over `/mcp`: the official TypeScript SDK v2 with the official tasks
//! extension package, which runs `queue.enqueue` as a task, follows it with `tasks/get`
//! and stops it with `tasks/cancel`; and `subscriptions/listen`, the revision's way to
//! hear that a task resource changed.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::McpClient;
use super::{QUEUE_TOOLS, names, setup, sorted};

/// `queue.enqueue` through the tasks session: the task's id.
async fn enqueue_task(client: &mut McpClient, arguments: Value) -> String {
    let called = client
        .ok(json!({ "op": "call", "name": "queue.enqueue", "arguments": arguments }))
        .await;
    assert_eq!(called["kind"], "task", "{called}");
    called["taskId"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_2026_client_runs_a_job_as_a_task_and_tasks_get_follows_it_to_its_result() {
    let s = setup().await;
    let mut client = McpClient::modern(&s.server.url(), &s.operator).await;
    let listed = client.ok(json!({ "op": "tools" })).await;
    assert_eq!(
        names(listed["tools"].as_array().unwrap()),
        sorted(&QUEUE_TOOLS)
    );

    let id = enqueue_task(
        &mut client,
        s.task(json!(["@fake say one", "@fake say two"])),
    )
    .await;
    // The task is the job.
    let job = s
        .server
        .queue()
        .get_job(&id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(job.id.to_string(), id);

    let settled = client.ok(json!({ "op": "settle", "taskId": id })).await;
    let outcome = &settled["outcome"];
    assert_eq!(outcome["status"], "completed", "{settled}");
    let result = &outcome["result"];
    assert_eq!(result["isError"], false, "{settled}");
    let view = &result["structuredContent"];
    assert_eq!(view["job"]["status"], "succeeded", "{settled}");
    assert_eq!(view["resource"], format!("stepwise://tasks/{id}"));
    assert!(
        view["page"]
            .as_str()
            .is_some_and(|p| p.ends_with(&format!("/tasks/queue/{id}"))),
        "{settled}"
    );
    assert_eq!(view["steps"].as_array().map(Vec::len), Some(2), "{settled}");
    // And each artifact, as the resource that reads it.
    let log = view["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "logs/steps/step-0000.log"))
        .unwrap_or_else(|| panic!("no step log in {settled}"));
    assert_eq!(
        log["resource"],
        format!("stepwise://tasks/{id}/artifacts/logs/steps/step-0000.log")
    );
    // The last status it polled says how the job ended, in words.
    let last = settled["lastTask"]["statusMessage"]
        .as_str()
        .unwrap_or_default();
    assert!(
        last.starts_with(&format!("job {id} succeeded")),
        "{settled}"
    );
}

#[tokio::test]
async fn a_2026_client_cancels_a_running_task_through_tasks_cancel() {
    let s = setup().await;
    let mut client = McpClient::modern(&s.server.url(), &s.operator).await;
    let id = enqueue_task(
        &mut client,
        s.task(json!([
            "@fake ignore-term\n@fake say started\n@fake sleep 60"
        ])),
    )
    .await;
    let running = client
        .ok(json!({ "op": "until", "taskId": id, "text": "step 1/1" }))
        .await;
    assert_eq!(running["status"], "working", "{running}");

    client.ok(json!({ "op": "cancel", "taskId": id })).await;
    let settled = client.ok(json!({ "op": "settle", "taskId": id })).await;
    assert_eq!(settled["outcome"]["status"], "cancelled", "{settled}");
    // The client stops following at once; the server says cancelled once the worker has
    // stopped the step.
    let deadline = Instant::now() + Duration::from_secs(30);
    let task = loop {
        let got = client.ok(json!({ "op": "get", "taskId": id })).await;
        if got["result"]["status"] != "working" {
            break got;
        }
        assert!(Instant::now() < deadline, "still working: {got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(task["result"]["status"], "cancelled", "{task}");
    let job = s
        .server
        .queue()
        .get_job(&id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(job.status.to_string(), "cancelled");
    assert_eq!(
        job.cancel_requested_by_user_id.as_deref(),
        Some("mcp-operator")
    );
}

#[tokio::test]
async fn a_2026_client_hears_each_change_of_a_task_on_its_listen_stream() {
    let s = setup().await;
    let mut client = McpClient::modern(&s.server.url(), &s.operator).await;
    // Queued with no task support asked for: a plain result, then listened to.
    let mut plain = McpClient::connected("http", &s.server.url(), &s.operator).await;
    let queued = plain
        .call(
            "queue.enqueue",
            s.task(json!(["@fake sleep 1\n@fake say one", "@fake say two"])),
        )
        .await;
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let uri = format!("stepwise://tasks/{id}");

    // Only task resources can be listened to: the list is not one.
    let listening = client
        .ok(json!({ "op": "listen", "uris": [uri, "stepwise://tasks?status=running"] }))
        .await;
    assert_eq!(
        listening["honored"]["resourceSubscriptions"],
        json!([uri]),
        "{listening}"
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut heard = Vec::new();
    loop {
        let notes = client.ok(json!({ "op": "notifications" })).await;
        heard.extend(notes.as_array().unwrap().iter().cloned());
        let job = s
            .server
            .queue()
            .get_job(&id.parse().unwrap())
            .await
            .unwrap();
        // Two steps start and end, and the job ends: more than one change is heard.
        if job.status.is_terminal() && heard.len() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "heard only {heard:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for note in &heard {
        assert_eq!(note["method"], "notifications/resources/updated", "{note}");
        assert_eq!(note["params"]["uri"], uri, "{note}");
    }
}
