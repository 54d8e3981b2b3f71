//! A job's usage: the totals of what its steps' agents reported.

use contract::job::task;
use contract::{JobState, NewEvent, StepUsage};
use queue::JobFilter;
use serde_json::{Value, json};

use crate::harness::*;

fn step_end(kind: &str, index: u64, usage: Option<Value>) -> NewEvent {
    let mut payload = json!({ "stepIndex": index, "stepId": format!("step-{}", index + 1) });
    if let Some(usage) = usage {
        payload["usage"] = usage;
    }
    NewEvent {
        kind: kind.into(),
        payload: payload.as_object().cloned().unwrap_or_default(),
        ..NewEvent::default()
    }
}

pub async fn a_jobs_usage_totals_the_usage_of_its_finished_steps(h: Harness) {
    let job = h.create(Spec::default()).await;
    assert_eq!(job.usage, None);
    let claimed = h.claim_exactly("w1", &job).await;
    assert_eq!(claimed.usage, None);
    let f = fence(&claimed);
    let events = [
        step_end(
            task::STEP_FINISHED,
            0,
            Some(json!({ "inputTokens": 1200, "cachedInputTokens": 300, "outputTokens": 45 })),
        ),
        // A step whose CLI reported nothing changes nothing.
        step_end(task::STEP_FINISHED, 1, None),
        // Only this step reports a price (claude does; codex and gemini do not).
        step_end(
            task::STEP_FINISHED,
            2,
            Some(json!({ "inputTokens": 10, "outputTokens": 5, "costUsd": 0.25 })),
        ),
        // A failed step's usage was spent too.
        step_end(
            task::STEP_FAILED,
            3,
            Some(json!({ "outputTokens": 1, "costUsd": 0.5 })),
        ),
        // Only a step's end is counted: a start carrying `usage` adds nothing.
        step_end(task::STEP_STARTED, 4, Some(json!({ "inputTokens": 99999 }))),
    ];
    for event in events {
        h.queue.append_event(&job.id, &f, event).await.unwrap();
    }
    let expected = StepUsage {
        input_tokens: Some(1210),
        cached_input_tokens: Some(300),
        output_tokens: Some(51),
        // No step reported reasoning tokens, so the job does not say 0.
        reasoning_tokens: None,
        cost_usd: Some(0.75),
        duration_ms: None,
    };
    assert_eq!(h.get(&job).await.usage, Some(expected));
    let listed = h.queue.list_jobs(&JobFilter::default()).await.unwrap();
    assert_eq!(listed.jobs[0].id, job.id);
    assert_eq!(listed.jobs[0].usage, Some(expected));
    let wire = serde_json::to_value(h.get(&job).await).unwrap();
    assert_eq!(
        wire["usage"],
        json!({ "inputTokens": 1210, "cachedInputTokens": 300, "outputTokens": 51, "costUsd": 0.75 })
    );

    // Finishing the job keeps the totals, whether the transition started from the row or
    // from what the replica last wrote.
    let heartbeat = h
        .queue
        .heartbeat(&job.id, &f, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(heartbeat.usage, Some(expected));
    let done = h
        .queue
        .complete(&job.id, &f, Some("done".into()))
        .await
        .unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert_eq!(done.usage, Some(expected));
    assert_eq!(h.get(&job).await.usage, Some(expected));
}

pub async fn usage_keeps_counting_across_attempts(h: Harness) {
    let job = h.create(Spec::attempts(2)).await;
    let first = h.claim_exactly("w1", &job).await;
    let tokens = json!({ "inputTokens": 100, "outputTokens": 7 });
    let finished = step_end(task::STEP_FINISHED, 0, Some(tokens.clone()));
    h.queue
        .append_event(&job.id, &fence(&first), finished.clone())
        .await
        .unwrap();
    let requeued = h
        .queue
        .fail(&job.id, &fence(&first), "network down".into(), true)
        .await
        .unwrap();
    assert_eq!(requeued.status, JobState::Queued);
    h.advance(std::time::Duration::from_secs(3600));
    let second = h.claim_exactly("w2", &job).await;
    assert_eq!(second.usage.and_then(|u| u.input_tokens), Some(100));
    h.queue
        .append_event(&job.id, &fence(&second), finished)
        .await
        .unwrap();
    let usage = h.get(&job).await.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (Some(200), Some(14))
    );
}

pub async fn a_malformed_step_usage_is_refused_by_field_and_adds_nothing(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    let before = h.event_kinds(&job).await;
    for bad in [
        json!("lots"),
        json!({ "inputTokens": -1 }),
        json!({ "outputTokens": "12" }),
        json!({ "costUsd": -0.01 }),
    ] {
        let event = step_end(task::STEP_FINISHED, 0, Some(bad.clone()));
        let refused = assert_code(
            h.queue.append_event(&job.id, &f, event).await,
            "invalid_queue_payload",
        );
        assert!(
            refused.to_string().contains("payload.usage"),
            "{bad}: {refused}"
        );
    }
    assert_eq!(h.event_kinds(&job).await, before);
    assert_eq!(h.get(&job).await.usage, None);
}
