//! The job timeline: worker events, ordering, cursor paging.

use contract::job::events;
use contract::{EventLevel, NewEvent};
use serde_json::json;

use crate::harness::*;

pub async fn worker_events_are_listed_in_order_with_cursor_paging(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    let mut appended = Vec::new();
    for i in 0..5 {
        let event = NewEvent {
            kind: "task.step.started".into(),
            level: if i == 4 {
                EventLevel::Warn
            } else {
                EventLevel::Info
            },
            message: format!("step {i}"),
            payload: json!({ "stepIndex": i, "stepId": format!("step-{}", i + 1) })
                .as_object()
                .unwrap()
                .clone(),
        };
        let stored = h
            .queue
            .append_event(&job.id, &f, event.clone())
            .await
            .unwrap();
        assert_eq!(stored.kind, event.kind);
        assert_eq!(stored.level, event.level);
        assert_eq!(stored.message, event.message);
        assert_eq!(stored.payload, event.payload);
        assert_eq!(stored.job_id, job.id);
        assert_eq!(stored.created_at, start_time());
        appended.push(stored);
    }
    let all = h.queue.list_events(&job.id, 0, 100).await.unwrap();
    assert_eq!(all.len(), 7);
    assert_eq!(all[0].kind, events::JOB_CREATED);
    assert_eq!(all[1].kind, events::JOB_CLAIMED);
    assert_eq!(all[2..], appended[..]);
    assert!(all.windows(2).all(|w| w[0].id < w[1].id));

    let mut paged = Vec::new();
    let mut cursor = 0;
    loop {
        let page = h.queue.list_events(&job.id, cursor, 3).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 3);
        cursor = page.last().unwrap().id;
        paged.extend(page);
    }
    assert_eq!(paged, all);
    let tail = h.queue.list_events(&job.id, all[4].id, 100).await.unwrap();
    assert_eq!(tail[..], all[5..]);
}

pub async fn event_ids_grow_across_jobs(h: Harness) {
    let a = h.create(Spec::default()).await;
    let b = h.create(Spec::default()).await;
    let ca = h.claim_exactly("w1", &a).await;
    let cb = h.claim_exactly("w2", &b).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            h.queue
                .append_event(&a.id, &fence(&ca), step_event("task.x"))
                .await
                .unwrap()
                .id,
        );
        ids.push(
            h.queue
                .append_event(&b.id, &fence(&cb), step_event("task.x"))
                .await
                .unwrap()
                .id,
        );
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let of_a = h.queue.list_events(&a.id, 0, 100).await.unwrap();
    assert!(of_a.iter().all(|e| e.job_id == a.id));
    assert_eq!(of_a.len(), 5);
}

pub async fn reserved_and_malformed_event_kinds_are_refused(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    for kind in [
        events::JOB_COMPLETED,
        "job.anything",
        "",
        "has space",
        "ünïcode",
    ] {
        assert_code(
            h.queue.append_event(&job.id, &f, step_event(kind)).await,
            "invalid_queue_payload",
        );
    }
    let huge = NewEvent {
        message: "x".repeat(20_000),
        ..step_event("task.log")
    };
    assert_code(
        h.queue.append_event(&job.id, &f, huge).await,
        "payload_too_large",
    );
    assert_eq!(
        h.event_kinds(&job).await,
        [events::JOB_CREATED, events::JOB_CLAIMED]
    );
}
