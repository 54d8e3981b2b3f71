//! Jobs as MCP tasks, for a client that declares the tasks extension: the official Rust
//! SDK's client, talking to `stepwise mcp`'s handler in this process (the pinned
//! TypeScript SDK speaks a protocol revision without the extension). The handler reaches
//! the server over REST, so every answer comes from the queue, not from memory.

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, GetTaskResult, Implementation, TaskPayload, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use stepwise::mcp::{Source, Stepwise};
use worker::client::QueueClient;

use super::{Setup, setup};

type Client = RunningService<RoleClient, ClientConfig>;

/// A client that reads tasks, connected to a handler over the server's REST API.
async fn tasks_client(s: &Setup) -> Client {
    let rest = QueueClient::new(&s.server.url(), &s.operator).unwrap();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let server = Stepwise::new(Source::Remote(rest))
            .serve(ours)
            .await
            .unwrap();
        let _ = server.waiting().await;
    });
    let capabilities = ClientCapabilities::builder().enable_tasks().build();
    ClientConfig::new(capabilities, Implementation::new("stepwise-tests", "0"))
        .serve(theirs)
        .await
        .unwrap()
}

async fn enqueue(client: &Client, arguments: Value) -> String {
    let params = CallToolRequestParams::new("queue.enqueue")
        .with_arguments(arguments.as_object().unwrap().clone());
    match client.call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working, "{created:?}");
            assert_eq!(created.task.poll_interval_ms, Some(2000));
            created.task.task_id
        }
        other => panic!("not a task: {other:?}"),
    }
}

async fn poll(client: &Client, id: &str) -> GetTaskResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = client.get_task(GetTaskParams::new(id)).await.unwrap();
        if got.task.task.status.is_terminal() {
            return got;
        }
        assert!(Instant::now() < deadline, "still working: {got:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn enqueue_answers_a_task_whose_id_is_the_job_and_tasks_get_follows_it_to_the_end() {
    let s = setup().await;
    let client = tasks_client(&s).await;
    let id = enqueue(&client, s.task(json!(["@fake say one", "@fake say two"]))).await;
    // The task is the job.
    let job = s
        .server
        .queue()
        .get_job(&id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(job.id.to_string(), id);

    let done = poll(&client, &id).await;
    assert_eq!(done.task.task.status, TaskStatus::Completed, "{done:?}");
    let message = done.task.task.status_message.clone().unwrap_or_default();
    assert!(
        message.starts_with(&format!("job {id} succeeded")),
        "{message}"
    );
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("no result: {done:?}")
    };
    let result = Value::Object(result.clone());
    assert_eq!(result["isError"], false, "{result}");
    let view = &result["structuredContent"];
    assert_eq!(view["job"]["status"], "succeeded", "{result}");
    assert_eq!(view["resource"], format!("stepwise://tasks/{id}"));
    assert!(
        view["page"]
            .as_str()
            .is_some_and(|p| p.ends_with(&format!("/tasks/queue/{id}"))),
        "{result}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tasks_cancel_goes_through_queue_cancellation() {
    let s = setup().await;
    let client = tasks_client(&s).await;
    let id = enqueue(
        &client,
        s.task(json!([
            "@fake ignore-term\n@fake say started\n@fake sleep 60"
        ])),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = client.get_task(GetTaskParams::new(&id)).await.unwrap();
        let message = got.task.task.status_message.unwrap_or_default();
        if message.contains("step 1/1") {
            break;
        }
        assert!(Instant::now() < deadline, "never started: {message}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .unwrap();
    let done = poll(&client, &id).await;
    assert_eq!(done.task.task.status, TaskStatus::Cancelled, "{done:?}");
    let job = s
        .server
        .queue()
        .get_job(&id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        job.cancel_requested_by_user_id.as_deref(),
        Some("mcp-operator")
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unknown_task_is_the_specs_invalid_params() {
    let s = setup().await;
    let client = tasks_client(&s).await;
    for id in ["nope", "00000000-0000-0000-0000-000000000000"] {
        let error = client.get_task(GetTaskParams::new(id)).await.unwrap_err();
        assert!(
            format!("{error:?}").contains("-32602") || format!("{error}").contains("no task"),
            "{error:?}"
        );
    }
    client.cancel().await.unwrap();
}
