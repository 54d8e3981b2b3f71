//! MCP over streamable HTTP at `/mcp`, with the same bearer tokens as the REST API.

use contract::JobState;
use queue::{Role, TokenKind};
use serde_json::json;

use super::client::{McpClient, is_error, text};
use super::{QUEUE_TOOLS, WORKER_TOOLS, names, setup, setup_with, sorted, until};

#[tokio::test]
async fn tools_list_shows_every_tool_with_a_described_schema() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let listed = client.ok(json!({ "op": "tools" })).await;
    let tools = listed["tools"].as_array().unwrap().clone();
    // A token sees the tools of its kind only: a user's, then a worker's.
    assert_eq!(names(&tools), sorted(&QUEUE_TOOLS));
    let worker = s.server.token("w-lists", TokenKind::Worker, None).await;
    let mut worker = McpClient::connected("http", &s.server.url(), &worker).await;
    let listed = worker.ok(json!({ "op": "tools" })).await;
    let worker_tools = listed["tools"].as_array().unwrap().clone();
    assert_eq!(names(&worker_tools), sorted(&WORKER_TOOLS));

    for tool in tools.iter().chain(&worker_tools) {
        let name = &tool["name"];
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 20),
            "{name} has no description"
        );
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{name}");
        for (field, property) in schema["properties"].as_object().unwrap() {
            assert!(
                property["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty()),
                "{name}.{field} has no description: {property}"
            );
        }
    }
    let enqueue = tools.iter().find(|t| t["name"] == "queue.enqueue").unwrap();
    let description = enqueue["description"].as_str().unwrap();
    let words: Vec<&str> = description.split_whitespace().collect();
    assert!(
        words
            .join(" ")
            .contains("every action the user asked for in its own step"),
        "{enqueue}"
    );
}

#[tokio::test]
async fn the_server_names_itself_at_initialize() {
    let s = setup().await;
    let mut client = McpClient::new("http", &s.server.url(), Some(&s.operator));
    let hello = client.ok(json!({ "op": "connect" })).await;
    assert_eq!(hello["server"]["name"], "stepwise", "{hello}");
    assert!(hello["capabilities"]["tools"].is_object(), "{hello}");
}

#[tokio::test]
async fn mcp_without_a_valid_bearer_token_is_refused_with_401() {
    let s = setup().await;
    let http = reqwest::Client::new();
    let url = format!("{}/mcp", s.server.url());
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "curl", "version": "0" } }
    });
    for auth in [
        None,
        Some("Bearer swu_not_a_token"),
        Some("Basic Zm9vOmJhcg=="),
    ] {
        let mut request = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{auth:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["code"], "auth_failed", "{body}");
    }
    // The SDK says so too, and no job was made.
    let mut client = McpClient::new("http", &s.server.url(), None);
    let refused = client.op(json!({ "op": "connect" })).await;
    assert!(refused["error"]["message"].as_str().is_some(), "{refused}");
    assert!(
        s.server
            .queue()
            .list_jobs(&Default::default())
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
}

#[tokio::test]
async fn enqueue_with_markdown_steps_queues_each_step_in_order() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let checklist = "## Steps\n- [ ] @fake say one\n- [ ] @fake say two\n\n- [ ] @fake say three\n";
    let result = client.call("queue.enqueue", s.task(json!(checklist))).await;
    assert!(!is_error(&result), "{result}");
    assert!(text(&result).starts_with("queued: job "), "{result}");
    let job = &result["structuredContent"]["job"];
    let steps: Vec<&str> = job["payload"]["task"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["instructions"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["@fake say one", "@fake say two", "@fake say three"]);
    assert_eq!(job["createdByUserId"], "mcp-operator");
    // The same job over REST.
    let id: contract::JobId = job["id"].as_str().unwrap().parse().unwrap();
    let stored = s.server.queue().get_job(&id).await.unwrap();
    assert_eq!(stored.payload["task"]["steps"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn enqueue_refuses_every_invalid_field_by_name_as_a_tool_error() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let result = client
        .call(
            "queue.enqueue",
            json!({ "objective": "x", "runtime": "vim", "publish": "fax" }),
        )
        .await;
    assert!(is_error(&result), "{result}");
    let error = &result["structuredContent"]["error"];
    assert_eq!(error["code"], "invalid_queue_payload", "{result}");
    let paths: Vec<&str> = error["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["runtime", "publish"], "{result}");
    assert!(text(&result).contains("runtime"), "{result}");

    // The server's own checks answer the same way: a checklist line that is not an item.
    let result = client
        .call("queue.enqueue", s.task(json!("- [ ] fine\nnot an item")))
        .await;
    assert!(is_error(&result), "{result}");
    assert!(text(&result).contains("line 2"), "{result}");

    // Both shapes at once is refused rather than one silently winning.
    let result = client
        .call("queue.enqueue", json!({ "request": {}, "objective": "x" }))
        .await;
    assert!(
        is_error(&result) && text(&result).contains("objective"),
        "{result}"
    );
    assert!(
        s.server
            .queue()
            .list_jobs(&Default::default())
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
}

#[tokio::test]
async fn enqueue_takes_the_job_request_laid_flat_as_the_rest_api_names_its_fields() {
    let s = setup_with(false).await;
    let mut client = s.client("http").await;
    // The payload laid flat: repository, targetRuntime and task at the top.
    let result = client
        .call(
            "queue.enqueue",
            json!({
                "repository": s.remote,
                "targetRuntime": "claude",
                "task": {
                    "instructions": "Flat",
                    "steps": [{ "instructions": "one" }, { "instructions": "two" }],
                    "publish": { "mode": "none" },
                },
            }),
        )
        .await;
    assert!(!is_error(&result), "{result}");
    let job = &result["structuredContent"]["job"];
    assert_eq!(job["payload"]["targetRuntime"], "claude", "{result}");
    assert_eq!(job["payload"]["task"]["steps"].as_array().unwrap().len(), 2);
    // The envelope laid flat: type, priority and payload at the top.
    let result = client
        .call(
            "queue.enqueue",
            json!({
                "type": "task",
                "priority": 7,
                "payload": { "repository": s.remote, "task": { "instructions": "Enveloped" } },
            }),
        )
        .await;
    assert!(!is_error(&result), "{result}");
    assert_eq!(
        result["structuredContent"]["job"]["priority"], 7,
        "{result}"
    );
    // Mixed with the task's fields, or a payload with its own fields beside it: refused by
    // name, nothing queued.
    for (args, field) in [
        (
            json!({ "task": { "instructions": "x" }, "objective": "y" }),
            "objective",
        ),
        (
            json!({ "payload": { "repository": s.remote, "task": { "instructions": "x" } }, "targetRuntime": "codex" }),
            "targetRuntime",
        ),
        (json!({ "request": { "payload": {} }, "task": {} }), "task"),
    ] {
        let result = client.call("queue.enqueue", args.clone()).await;
        assert!(is_error(&result), "{args}: {result}");
        let paths: Vec<&str> = result["structuredContent"]["error"]["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths, [field], "{args}: {result}");
    }
    // What the contract refuses in a flat request it names by its own path.
    let result = client
        .call(
            "queue.enqueue",
            json!({ "repository": s.remote, "task": { "instructions": "" } }),
        )
        .await;
    assert!(
        is_error(&result) && text(&result).contains("task.instructions"),
        "{result}"
    );
    let jobs = s
        .server
        .queue()
        .list_jobs(&Default::default())
        .await
        .unwrap()
        .jobs;
    assert_eq!(jobs.len(), 2);
}

#[tokio::test]
async fn a_job_runs_to_success_and_the_tools_tell_its_steps_events_and_artifacts() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let queued = client
        .call(
            "queue.enqueue",
            s.task(json!(["@fake say hello", "@fake write out.txt done"])),
        )
        .await;
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = until(&mut client, &id, |s| s.is_terminal()).await;
    let view = &done["structuredContent"];
    assert_eq!(view["job"]["status"], "succeeded", "{done}");
    assert!(
        text(&done).starts_with(&format!("job {id} succeeded")),
        "{done}"
    );
    let states: Vec<&str> = view["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["succeeded", "succeeded"], "{done}");

    let events = client.call("queue.events", json!({ "jobId": id })).await;
    let kinds: Vec<&str> = events["structuredContent"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"job.created") && kinds.contains(&"job.completed"),
        "{kinds:?}"
    );
    // Reading on from `next` gives nothing new.
    let next = events["structuredContent"]["next"].clone();
    let more = client
        .call("queue.events", json!({ "jobId": id, "after": next }))
        .await;
    assert_eq!(more["structuredContent"]["items"], json!([]), "{more}");

    let artifacts = client.call("queue.artifacts", json!({ "jobId": id })).await;
    let log = artifacts["structuredContent"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"].as_str().unwrap().starts_with("logs/steps/"))
        .unwrap_or_else(|| panic!("no step log in {artifacts}"))["name"]
        .clone();
    let read = client
        .call(
            "queue.artifact",
            json!({ "jobId": id, "name": log, "maxBytes": 5 }),
        )
        .await;
    assert!(!is_error(&read), "{read}");
    assert_eq!(read["structuredContent"]["truncated"], true, "{read}");
    assert_eq!(read["structuredContent"]["text"].as_str().unwrap().len(), 5);

    let list = client
        .call("queue.list", json!({ "status": "succeeded" }))
        .await;
    assert!(text(&list).contains(&id), "{list}");
}

#[tokio::test]
async fn queue_cancel_stops_a_running_job_as_rest_cancel_does() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let queued = client
        .call(
            "queue.enqueue",
            s.task(json!([
                "@fake ignore-term\n@fake say started\n@fake sleep 60",
                "@fake say never"
            ])),
        )
        .await;
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let running = until(&mut client, &id, |s| s == JobState::Running).await;
    assert!(text(&running).contains("running"), "{running}");
    let asked = client
        .call(
            "queue.cancel",
            json!({ "jobId": id, "reason": "changed my mind" }),
        )
        .await;
    assert!(!is_error(&asked), "{asked}");
    assert!(
        !asked["structuredContent"]["job"]["cancelRequestedAt"].is_null(),
        "{asked}"
    );
    let done = until(&mut client, &id, |s| s.is_terminal()).await;
    assert_eq!(
        done["structuredContent"]["job"]["status"], "cancelled",
        "{done}"
    );
    assert!(text(&done).contains("changed my mind"), "{done}");
    // Again: unchanged, as over REST.
    let again = client.call("queue.cancel", json!({ "jobId": id })).await;
    assert!(!is_error(&again), "{again}");
}

#[tokio::test]
async fn roles_are_the_rest_apis_a_viewer_reads_and_a_worker_token_gets_no_user_tools() {
    let s = setup().await;
    let url = s.server.url();
    let viewer = s
        .server
        .token("v", TokenKind::User, Some(Role::Viewer))
        .await;
    let mut client = McpClient::connected("http", &url, &viewer).await;
    let refused = client.call("queue.enqueue", s.task(json!([]))).await;
    assert!(is_error(&refused), "{refused}");
    assert_eq!(
        refused["structuredContent"]["error"]["code"],
        "not_authorized"
    );
    let listed = client.call("queue.list", json!({})).await;
    assert!(!is_error(&listed), "{listed}");

    let worker = s.server.token("w", TokenKind::Worker, None).await;
    let mut client = McpClient::connected("http", &url, &worker).await;
    let refused = client.call("queue.list", json!({})).await;
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "not_authorized",
        "{refused}"
    );
}

#[tokio::test]
async fn a_job_id_that_is_not_one_reads_as_an_unknown_job() {
    let s = setup().await;
    let mut client = s.client("http").await;
    for id in ["nope", "<script>", "00000000-0000-0000-0000-000000000000"] {
        let result = client.call("queue.get", json!({ "jobId": id })).await;
        assert!(is_error(&result), "{result}");
        assert_eq!(
            result["structuredContent"]["error"]["code"], "job_not_found",
            "{result}"
        );
    }
    let bad = client
        .call("queue.list", json!({ "status": "sleeping" }))
        .await;
    assert!(is_error(&bad) && text(&bad).contains("status"), "{bad}");
}

#[tokio::test]
async fn enqueue_with_depends_on_queues_a_job_that_waits_and_names_an_unknown_one() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let first = client
        .call("queue.enqueue", s.task(json!(["@fake say one"])))
        .await;
    assert!(!is_error(&first), "{first}");
    let first_id = first["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut waiting = s.task(json!(["@fake say two"]));
    waiting["dependsOn"] = json!([first_id]);
    let second = client.call("queue.enqueue", waiting).await;
    assert!(!is_error(&second), "{second}");
    assert_eq!(
        second["structuredContent"]["job"]["waitingFor"],
        json!([first_id])
    );
    let mut unknown = s.task(json!(["@fake say three"]));
    unknown["dependsOn"] = json!(["0190a000-0000-7000-8000-000000000000"]);
    let refused = client.call("queue.enqueue", unknown).await;
    assert!(is_error(&refused), "{refused}");
    assert_eq!(
        refused["structuredContent"]["error"]["errors"][0]["path"], "dependsOn[0]",
        "{refused}"
    );
}
