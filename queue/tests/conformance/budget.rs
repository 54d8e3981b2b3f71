//! A job's budget: reached by the usage its steps report, it asks the running job to pause
//! (at once for minutes), the worker's acknowledgement pauses it for its budget, and it
//! cannot run again until an operator raises the budget.

use contract::events::{BudgetExceeded, PauseReason};
use contract::job::{events, task};
use contract::{BudgetLimit, JobState, NewEvent};
use serde_json::{Value, json};

use crate::harness::*;

fn budgeted(budget: Value) -> Value {
    let mut spec = Spec::default().json();
    spec["payload"]["task"]["budget"] = budget;
    spec["payload"]["task"]["runtime"] = json!({ "mode": "claude" });
    spec
}

fn step_end(index: u64, usage: Value) -> NewEvent {
    let payload =
        json!({ "stepIndex": index, "stepId": format!("step-{}", index + 1), "usage": usage });
    NewEvent {
        kind: task::STEP_FINISHED.into(),
        payload: payload.as_object().cloned().unwrap_or_default(),
        ..NewEvent::default()
    }
}

pub async fn a_budget_reached_asks_the_running_job_to_pause_once_and_its_ack_pauses_it_for_the_budget(
    h: Harness,
) {
    let spec = budgeted(json!({ "maxCostUsd": 1.0, "maxTokens": 100000 }));
    let job = h.queue.create_job(&spec, Some("alice")).await.unwrap();
    assert_eq!(job.budget().unwrap().max_cost_usd, Some(1.0));
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    h.queue
        .append_event(&job.id, &f, step_end(0, json!({ "costUsd": 0.6 })))
        .await
        .unwrap();
    assert_eq!(h.get(&job).await.pause_requested, None, "under the budget");
    h.queue
        .append_event(&job.id, &f, step_end(1, json!({ "costUsd": 0.5 })))
        .await
        .unwrap();
    let asked = h.get(&job).await;
    let request = asked
        .pause_requested
        .clone()
        .expect("the budget asks for a pause");
    assert_eq!(request.reason, PauseReason::Budget);
    assert!(
        !request.immediate,
        "a price reached waits for the step boundary"
    );
    // A later usage asks nothing more.
    h.queue
        .append_event(&job.id, &f, step_end(2, json!({ "costUsd": 0.1 })))
        .await
        .unwrap();
    let told = h.queue.list_events(&job.id, 0, 1000).await.unwrap();
    let exceeded: Vec<BudgetExceeded> = told
        .iter()
        .filter(|e| e.kind == events::JOB_BUDGET_EXCEEDED)
        .filter_map(|e| contract::events::read_payload(&e.payload))
        .collect();
    assert_eq!(exceeded.len(), 1, "{:?}", h.event_kinds(&job).await);
    assert_eq!(exceeded[0].overrun.limit, BudgetLimit::CostUsd);
    assert_eq!(exceeded[0].overrun.max, 1.0);
    assert!((exceeded[0].overrun.spent - 1.1).abs() < 1e-9);
    let kinds = h.event_kinds(&job).await;
    let at = kinds
        .iter()
        .position(|k| k == events::JOB_BUDGET_EXCEEDED)
        .unwrap();
    assert_eq!(kinds[at + 1], events::JOB_PAUSE_REQUESTED);

    let paused = h.queue.ack_pause(&job.id, &f).await.unwrap();
    assert_eq!(paused.status, JobState::Paused);
    assert_eq!(paused.pause_reason, Some(PauseReason::Budget));
    let read = h.get(&job).await;
    assert_eq!(read.pause_reason, Some(PauseReason::Budget));
    assert_eq!(
        serde_json::to_value(&read).unwrap()["pauseReason"],
        "budget"
    );

    // Spent, it does not run again: not resumed, not claimed.
    let refused = assert_code(
        h.queue.resume(&job.id, Some("alice"), None).await,
        "job_state_conflict",
    );
    assert!(refused.to_string().contains("/budget"), "{refused}");
    assert!(refused.to_string().contains("$1.20 of $1.00"), "{refused}");
    assert!(h.claim("w2").await.is_none());

    // A raise that is still spent is kept, and still refuses the resume.
    let low = h
        .queue
        .set_budget(&job.id, Some("alice"), &json!({ "maxCostUsd": 1.1 }))
        .await
        .unwrap();
    assert_eq!(low.budget().unwrap().max_cost_usd, Some(1.1));
    assert_eq!(
        low.budget().unwrap().max_tokens,
        None,
        "the new budget replaces the old"
    );
    assert_code(
        h.queue.resume(&job.id, Some("alice"), None).await,
        "job_state_conflict",
    );
    let raised = h
        .queue
        .set_budget(&job.id, Some("alice"), &json!({ "maxCostUsd": 5 }))
        .await
        .unwrap();
    assert_eq!(raised.status, JobState::Paused);
    let resumed = h.queue.resume(&job.id, Some("alice"), None).await.unwrap();
    assert_eq!(resumed.status, JobState::Queued);
    assert_eq!(resumed.pause_reason, None);
    assert_eq!(resumed.pause_requested, None);
    let again = h.claim_exactly("w2", &job).await;
    assert_eq!(again.budget().unwrap().max_cost_usd, Some(5.0));
    let changed = h.queue.list_events(&job.id, 0, 1000).await.unwrap();
    let changes: Vec<_> = changed
        .iter()
        .filter(|e| e.kind == events::JOB_BUDGET_CHANGED)
        .collect();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[1].payload["requestedBy"], "alice");
    assert_eq!(changes[1].payload["budget"], json!({ "maxCostUsd": 5.0 }));
    assert_eq!(changes[1].payload["was"], json!({ "maxCostUsd": 1.1 }));
}

pub async fn minutes_reached_ask_for_an_immediate_pause_and_tokens_count_input_and_output(
    h: Harness,
) {
    let job = h
        .queue
        .create_job(&budgeted(json!({ "maxMinutes": 0.5 })), None)
        .await
        .unwrap();
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    // A stopped step's time counts too.
    let stopped = NewEvent {
        kind: task::STEP_CANCELLED.into(),
        payload: json!({ "stepIndex": 0, "stepId": "step-1", "stopMs": 3, "killed": false,
                         "usage": { "durationMs": 30000 } })
        .as_object()
        .cloned()
        .unwrap(),
        ..NewEvent::default()
    };
    h.queue.append_event(&job.id, &f, stopped).await.unwrap();
    let asked = h.get(&job).await;
    assert_eq!(asked.usage.unwrap().duration_ms, Some(30000));
    assert!(
        asked.pause_requested.unwrap().immediate,
        "minutes stop the step at once"
    );

    let tokens = h
        .queue
        .create_job(&budgeted(json!({ "maxTokens": 1000 })), None)
        .await
        .unwrap();
    let claimed = h.claim_exactly("w2", &tokens).await;
    let f = fence(&claimed);
    h.queue
        .append_event(
            &tokens.id,
            &f,
            step_end(
                0,
                json!({ "inputTokens": 600, "cachedInputTokens": 500, "outputTokens": 399 }),
            ),
        )
        .await
        .unwrap();
    assert_eq!(h.get(&tokens).await.pause_requested, None, "999 of 1,000");
    h.queue
        .append_event(&tokens.id, &f, step_end(1, json!({ "outputTokens": 1 })))
        .await
        .unwrap();
    assert_eq!(
        h.get(&tokens).await.pause_requested.map(|p| p.reason),
        Some(PauseReason::Budget)
    );
}

pub async fn a_budget_is_checked_by_name_and_a_spent_one_keeps_a_retry_from_running(h: Harness) {
    let refused = h
        .queue
        .create_job(
            &budgeted(json!({ "maxCostUsd": 0, "maxMinutes": "soon" })),
            None,
        )
        .await;
    let error = assert_code(refused, "invalid_queue_payload");
    let shown = error.to_string();
    assert!(
        shown.contains("task.budget.maxCostUsd") && shown.contains("task.budget.maxMinutes"),
        "{shown}"
    );

    let mut codex = Spec::default().json();
    codex["payload"]["task"]["budget"] = json!({ "maxCostUsd": 1 });
    let refused = assert_code(
        h.queue.create_job(&codex, None).await,
        "invalid_queue_payload",
    );
    assert!(
        refused.to_string().contains("reports no price"),
        "{refused}"
    );

    let job = h
        .queue
        .create_job(&budgeted(json!({ "maxTokens": 10 })), None)
        .await
        .unwrap();
    assert_code(
        h.queue.set_budget(&job.id, None, &json!({})).await,
        "invalid_queue_payload",
    );
    assert_code(
        h.queue
            .set_budget(&job.id, None, &json!({ "maxTokens": -1 }))
            .await,
        "invalid_queue_payload",
    );
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    h.queue
        .append_event(&job.id, &f, step_end(0, json!({ "outputTokens": 10 })))
        .await
        .unwrap();
    h.queue
        .fail(&job.id, &f, "the step broke".into(), false)
        .await
        .unwrap();
    assert_eq!(h.get(&job).await.status, JobState::Failed);
    assert_code(
        h.queue.retry_from_step(&job.id, None, Some(0)).await,
        "job_state_conflict",
    );
    h.queue
        .set_budget(&job.id, None, &json!({ "maxTokens": 20 }))
        .await
        .unwrap();
    let retried = h
        .queue
        .retry_from_step(&job.id, None, Some(0))
        .await
        .unwrap();
    assert_eq!(retried.status, JobState::Queued);
}

pub async fn a_budget_reached_is_in_the_webhook_outbox_as_its_own_event(h: Harness) {
    h.queue.listen_for_notifications("r1").await.unwrap();
    let job = h
        .queue
        .create_job(&budgeted(json!({ "maxTokens": 10 })), None)
        .await
        .unwrap();
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .append_event(
            &job.id,
            &fence(&claimed),
            step_end(0, json!({ "outputTokens": 10 })),
        )
        .await
        .unwrap();
    let notices = h
        .queue
        .claim_notifications("r1", std::time::Duration::from_secs(30), 10)
        .await
        .unwrap();
    assert_eq!(notices.len(), 1, "{notices:#?}");
    assert_eq!(notices[0].event, "job.budget_exceeded");
    assert_eq!(notices[0].status, JobState::Running);
}
