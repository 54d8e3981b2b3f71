//! Seed 003's operations as tools: tasks.start, tasks.status, tasks.list, tasks.cancel.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{McpClient, is_error, text};
use super::setup;

/// Calls `tasks.status` until the task's status is `want`; the last task.
async fn until_status(client: &mut McpClient, id: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let result = client.call("tasks.status", json!({ "taskId": id })).await;
        let task = result["structuredContent"].clone();
        if task["state"]["status"] == want {
            return task;
        }
        assert!(Instant::now() < deadline, "not {want}: {result}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_task_started_with_its_criteria_runs_and_reads_in_seed_003s_shape() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let started = client
        .call(
            "tasks.start",
            json!({
                "objective": "Greet the team",
                "completionCriteria": "  both greetings are in the log ",
                "repository": s.remote,
                "steps": "- [ ] @fake say hello\n- [ ] @fake say again",
                "runtime": "claude",
                "publish": "none",
            }),
        )
        .await;
    assert!(!is_error(&started), "{started}");
    let task = &started["structuredContent"];
    assert_eq!(
        task["completion_criteria"], "both greetings are in the log",
        "{task}"
    );
    assert_eq!(task["name"], "Greet the team");
    let id = task["uri"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    // The criteria and the limit are stored with the job.
    let job = s
        .server
        .queue()
        .get_job(&id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        job.payload["task"]["completion"],
        json!({ "criteria": "both greetings are in the log", "maxIterations": 10 })
    );

    let done = until_status(&mut client, &id, "completed").await;
    assert_eq!(done["progress"]["percentage"], 100, "{done}");
    assert_eq!(done["state"]["last_action"], "@fake say again", "{done}");
    let listed = client
        .call("tasks.list", json!({ "status": "completed" }))
        .await;
    assert_eq!(
        listed["structuredContent"]["items"][0]["uri"], done["uri"],
        "{listed}"
    );
    assert!(text(&listed).contains(&id), "{listed}");
}

#[tokio::test]
async fn tasks_cancel_stops_a_running_task() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let started = client
        .call(
            "tasks.start",
            json!({
                "objective": "Wait",
                "repository": s.remote,
                "steps": ["@fake ignore-term\n@fake say started\n@fake sleep 60"],
                "runtime": "claude",
                "publish": "none",
            }),
        )
        .await;
    let id = started["structuredContent"]["uri"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    until_status(&mut client, &id, "running").await;
    let asked = client
        .call("tasks.cancel", json!({ "taskId": id, "reason": "not now" }))
        .await;
    assert!(!is_error(&asked), "{asked}");
    let done = until_status(&mut client, &id, "cancelled").await;
    assert_eq!(done["state"]["status"], "cancelled");
}

#[tokio::test]
async fn a_task_started_with_a_check_loops_until_it_passes_and_counts_its_iterations() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let started = client
        .call(
            "tasks.start",
            json!({
                "objective": "Count\n@fake write runs.txt run",
                "completionCriteria": "three runs",
                "checkCommand": "test $(wc -l < runs.txt) -ge 3",
                "maxIterations": 4,
                "repository": s.remote,
                "runtime": "claude",
                "publish": "none",
            }),
        )
        .await;
    assert!(!is_error(&started), "{started}");
    let task = &started["structuredContent"];
    assert_eq!(task["state"]["max_iterations"], 4, "{task}");
    let id = task["uri"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let done = until_status(&mut client, &id, "completed").await;
    let state = &done["state"];
    assert_eq!(
        (state["iteration"].clone(), state["max_iterations"].clone()),
        (json!(2), json!(4)),
        "{done}"
    );
    assert_eq!(
        state["last_action"], "iteration 2: the check passed",
        "{done}"
    );
    assert_eq!(
        done["progress"]["checkpoints"],
        json!(["step-1", "iteration-1", "iteration-2"]),
        "{done}"
    );
    let status = client.call("tasks.status", json!({ "taskId": id })).await;
    assert!(!is_error(&status), "{status}");
    let got = client.call("queue.get", json!({ "jobId": id })).await;
    let summary = got["structuredContent"]["summary"]
        .as_str()
        .unwrap_or_default();
    assert!(
        summary.starts_with(&format!("job {id} succeeded")),
        "{summary}"
    );
}

#[tokio::test]
async fn tasks_start_refuses_what_the_contract_refuses_by_field() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let refused = client
        .call(
            "tasks.start",
            json!({ "objective": "x", "checkCommand": "true", "maxIterations": 0 }),
        )
        .await;
    assert!(is_error(&refused), "{refused}");
    assert!(
        text(&refused).contains("task.completion.maxIterations"),
        "{refused}"
    );
    // A limit without a check would do nothing: refused, saying what it needs, and never
    // kept as something else.
    let no_check = client
        .call(
            "tasks.start",
            json!({ "objective": "x", "completionCriteria": "green", "maxIterations": 4 }),
        )
        .await;
    assert!(is_error(&no_check), "{no_check}");
    let error = &no_check["structuredContent"]["error"]["errors"][0];
    assert_eq!(error["path"], "maxIterations", "{no_check}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("needs checkCommand"),
        "{no_check}"
    );
    let no_check = client
        .call(
            "tasks.start",
            json!({ "objective": "x", "outputPattern": "ok" }),
        )
        .await;
    assert!(
        is_error(&no_check) && text(&no_check).contains("task.completion.outputPattern"),
        "{no_check}"
    );
    let blank = client
        .call("tasks.start", json!({ "objective": " " }))
        .await;
    assert!(
        is_error(&blank) && text(&blank).contains("objective"),
        "{blank}"
    );
    let bad = client
        .call("tasks.list", json!({ "status": "sleeping" }))
        .await;
    assert!(is_error(&bad) && text(&bad).contains("status"), "{bad}");
}

#[tokio::test]
async fn tasks_pause_and_resume_stop_a_task_at_a_step_and_continue_it_there() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let started = client
        .call(
            "tasks.start",
            json!({
                "objective": "Two parts",
                "repository": s.remote,
                "steps": ["@fake sleep 1\n@fake write a.txt x", "@fake write b.txt y"],
                "runtime": "claude",
                "publish": "none",
            }),
        )
        .await;
    let id = started["structuredContent"]["uri"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    // Step 1 is under way (its agent sleeps a second).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = client.call("tasks.status", json!({ "taskId": id })).await;
        let message = status["structuredContent"]["progress"]["message"].to_string();
        if message.contains("step 1/2") {
            break;
        }
        assert!(Instant::now() < deadline, "step 1 never started: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = client.call("tasks.pause", json!({ "taskId": id })).await;
    assert!(!is_error(&asked), "{asked}");
    let paused = until_status(&mut client, &id, "paused").await;
    assert_eq!(
        paused["progress"]["checkpoints"],
        json!(["step-1"]),
        "{paused}"
    );
    assert!(
        paused["progress"]["message"]
            .as_str()
            .unwrap()
            .contains("paused; resuming continues after step 1"),
        "{paused}"
    );
    // Only an ended task is retried.
    let refused = client.call("tasks.retry", json!({ "taskId": id })).await;
    assert!(is_error(&refused), "{refused}");
    assert!(text(&refused).contains("job_state_conflict"), "{refused}");
    let resumed = client.call("tasks.resume", json!({ "taskId": id })).await;
    assert!(!is_error(&resumed), "{resumed}");
    let done = until_status(&mut client, &id, "completed").await;
    assert_eq!(done["state"]["status"], "completed", "{done}");

    // Completed, it takes a follow-up as the same task: round 2 runs only its step.
    let followed = client
        .call(
            "tasks.follow_up",
            json!({ "taskId": id, "steps": ["@fake write c.txt z"] }),
        )
        .await;
    assert!(!is_error(&followed), "{followed}");
    let user = s.server.user(queue::Role::Operator).await;
    let job_id: contract::JobId = id.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = user.get_job(&job_id).await.unwrap();
        if job.round == 2 && job.status == contract::JobState::Succeeded {
            break;
        }
        assert!(Instant::now() < deadline, "round 2 never ended: {job:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = client
        .call(
            "tasks.follow_up",
            json!({ "taskId": "not-a-task", "steps": ["x"] }),
        )
        .await;
    assert!(is_error(&again), "{again}");
}

#[tokio::test]
async fn a_task_at_the_gate_is_sent_back_with_a_step_then_approved_through_tools() {
    let s = setup().await;
    let mut client = s.client("http").await;
    let queued = client
        .call(
            "queue.enqueue",
            json!({ "request": { "payload": {
                "repository": s.remote,
                "task": {
                    "instructions": "Gate",
                    "runtime": { "mode": "claude" },
                    "publish": { "mode": "none", "approval": "required" },
                    "steps": [{ "instructions": "@fake write a.txt x" }],
                },
            } } }),
        )
        .await;
    assert!(!is_error(&queued), "{queued}");
    let id = queued["structuredContent"]["job"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let waiting = until_status(&mut client, &id, "paused").await;
    assert!(
        waiting["progress"]["message"]
            .as_str()
            .unwrap()
            .contains("awaiting an operator's approval"),
        "{waiting}"
    );
    let sent_back = client
        .call(
            "tasks.append",
            json!({ "taskId": id, "steps": "- [ ] @fake write b.txt y" }),
        )
        .await;
    assert!(!is_error(&sent_back), "{sent_back}");
    // Back at the gate once the new step ran.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = client.call("tasks.status", json!({ "taskId": id })).await;
        let task = &status["structuredContent"];
        if task["state"]["status"] == "paused"
            && task["progress"]["checkpoints"] == json!(["step-1", "step-2"])
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never back at the gate: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let approved = client.call("tasks.approve", json!({ "taskId": id })).await;
    assert!(!is_error(&approved), "{approved}");
    until_status(&mut client, &id, "completed").await;
    let late = client
        .call("tasks.reject", json!({ "taskId": id, "reason": "late" }))
        .await;
    assert!(is_error(&late), "{late}");
}
