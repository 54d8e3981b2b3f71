//! Jobs as resources in seed 003's task shape, over both transports.

use serde_json::{Value, json};

use super::client::McpClient;
use super::{setup, until};

async fn read(client: &mut McpClient, uri: &str) -> Value {
    let result = client.ok(json!({ "op": "read", "uri": uri })).await;
    let text = result["contents"][0]["text"].as_str().unwrap();
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

async fn tasks_are_listed_and_read_in_seed_003s_shape(transport: &str) {
    let s = setup().await;
    let mut client = s.client(transport).await;
    let queued = client
        .call(
            "queue.enqueue",
            s.task(json!(["@fake say one", "@fake write b.txt two"])),
        )
        .await;
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    until(&mut client, &id, |s| s.is_terminal()).await;
    let uri = format!("stepwise://tasks/{id}");

    let listed = client.ok(json!({ "op": "resources" })).await;
    let first = &listed["resources"][0];
    assert_eq!(first["uri"], uri, "{listed}");
    assert_eq!(first["name"], "Greet", "{listed}");
    assert_eq!(first["mimeType"], "application/json");

    let templates = client.ok(json!({ "op": "templates" })).await;
    let shapes: Vec<&str> = templates["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert!(shapes.contains(&"stepwise://tasks{?status}"), "{templates}");

    let task = read(&mut client, &uri).await;
    assert_eq!(task["uri"], uri);
    assert_eq!(task["state"]["status"], "completed", "{task}");
    assert_eq!(task["state"]["iteration"], 2, "{task}");
    assert_eq!(task["state"]["max_iterations"], 2, "{task}");
    assert_eq!(
        task["state"]["last_action"], "@fake write b.txt two",
        "{task}"
    );
    assert_eq!(task["state"]["next_steps"], json!([]), "{task}");
    assert_eq!(task["progress"]["percentage"], 100, "{task}");
    assert_eq!(task["metadata"]["created_by"], "mcp-operator", "{task}");
    let artifacts = task["progress"]["artifacts_created"].as_array().unwrap();
    assert!(
        artifacts.iter().any(|a| a == "logs/steps/step-0000.log"),
        "{task}"
    );

    let done = read(&mut client, "stepwise://tasks?status=completed").await;
    assert_eq!(done[0]["uri"], uri, "{done}");
    let none = read(&mut client, "stepwise://tasks?status=running").await;
    assert_eq!(none, json!([]));

    let log = read(
        &mut client,
        &format!("{uri}/artifacts/logs/steps/step-0000.log"),
    )
    .await;
    assert!(log.as_str().is_some_and(|t| t.contains("one")), "{log}");

    for bad in [
        "stepwise://tasks/00000000-0000-0000-0000-000000000000",
        "stepwise://tasks/nope",
        "stepwise://elsewhere",
        "stepwise://tasks?status=sleeping",
    ] {
        let refused = client.op(json!({ "op": "read", "uri": bad })).await;
        assert!(refused["error"]["message"].is_string(), "{bad}: {refused}");
    }
}

#[tokio::test]
async fn over_http_tasks_are_listed_and_read_in_seed_003s_shape() {
    tasks_are_listed_and_read_in_seed_003s_shape("http").await;
}

#[tokio::test]
async fn over_stdio_tasks_are_listed_and_read_in_seed_003s_shape() {
    tasks_are_listed_and_read_in_seed_003s_shape("stdio").await;
}

async fn a_subscriber_hears_each_change_of_its_task(transport: &str) {
    let s = setup().await;
    let mut client = s.client(transport).await;
    let queued = client
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
    client.ok(json!({ "op": "subscribe", "uri": uri })).await;
    until(&mut client, &id, |s| s.is_terminal()).await;
    // The last update may still be on its way.
    let mut heard = Vec::new();
    for _ in 0..50 {
        let batch = client.ok(json!({ "op": "notifications" })).await;
        heard.extend(batch.as_array().unwrap().iter().cloned());
        if heard.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(heard.len() >= 3, "too few updates: {heard:?}");
    for note in &heard {
        assert_eq!(note["method"], "notifications/resources/updated");
        assert_eq!(note["params"]["uri"], uri.as_str());
    }
    // Only a task can be subscribed to, and only one that exists.
    for bad in [
        "stepwise://tasks",
        "stepwise://tasks/00000000-0000-0000-0000-000000000000",
    ] {
        let refused = client.op(json!({ "op": "subscribe", "uri": bad })).await;
        assert!(refused["error"]["message"].is_string(), "{bad}: {refused}");
    }
}

#[tokio::test]
async fn over_http_a_subscriber_hears_each_change_of_its_task() {
    a_subscriber_hears_each_change_of_its_task("http").await;
}

#[tokio::test]
async fn over_stdio_a_subscriber_hears_each_change_of_its_task() {
    a_subscriber_hears_each_change_of_its_task("stdio").await;
}
