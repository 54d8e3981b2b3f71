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

/// A reader paging one job's events by cursor, while that job and others are written
/// concurrently, ends up with every event of the job: ids never appear behind its cursor.
pub async fn a_cursor_reader_never_skips_events_written_concurrently(h: Harness) {
    const PER_WRITER: usize = 40;
    let watched = h
        .claim_exactly("w0", &h.create(Spec::default()).await)
        .await;
    let mut others = Vec::new();
    for i in 1..=3 {
        let job = h.create(Spec::default()).await;
        others.push(h.claim_exactly(&format!("w{i}"), &job).await);
    }
    let mut writers = Vec::new();
    for job in std::iter::once(watched.clone()).chain(others) {
        for _ in 0..2 {
            let queue = h.queue.clone();
            let job = job.clone();
            writers.push(tokio::spawn(async move {
                let f = fence(&job);
                for _ in 0..PER_WRITER {
                    queue
                        .append_event(&job.id, &f, step_event("task.step.log"))
                        .await
                        .unwrap();
                }
            }));
        }
    }
    let mut seen = Vec::new();
    let mut cursor = 0;
    let expected = 2 + 2 * PER_WRITER; // created, claimed, and both writers' events
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while seen.len() < expected && std::time::Instant::now() < deadline {
        for event in h.queue.list_events(&watched.id, cursor, 7).await.unwrap() {
            cursor = event.id;
            seen.push(event.id);
        }
        tokio::task::yield_now().await;
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let all: Vec<i64> = h
        .queue
        .list_events(&watched.id, 0, 1000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(all.len(), expected);
    assert_eq!(seen, all, "the cursor reader skipped or repeated events");
}

/// A long timeline is read from its end (the latest activity) or without its log lines
/// (the milestones a step timeline is built from), and counted.
pub async fn a_timeline_is_read_from_its_end_or_without_its_log_lines(h: Harness) {
    use contract::job::task;
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    let mut kinds = vec![
        events::JOB_CREATED.to_string(),
        events::JOB_CLAIMED.to_string(),
    ];
    for i in 0..30 {
        let kind = match i {
            0 => task::STEP_STARTED,
            29 => task::STEP_FINISHED,
            _ => task::STEP_LOG,
        };
        h.queue
            .append_event(&job.id, &f, step_event(kind))
            .await
            .unwrap();
        kinds.push(kind.to_string());
    }
    let all = h.queue.list_events(&job.id, 0, 1000).await.unwrap();
    assert_eq!(h.queue.count_events(&job.id).await.unwrap(), 32);

    let latest = h.queue.list_latest_events(&job.id, 5).await.unwrap();
    assert_eq!(latest[..], all[27..], "the newest five, oldest first");
    let everything = h.queue.list_latest_events(&job.id, 1000).await.unwrap();
    assert_eq!(everything, all);

    let milestones = h
        .queue
        .list_events_except(&job.id, task::STEP_LOG, 0, 1000)
        .await
        .unwrap();
    let milestone_kinds: Vec<&str> = milestones.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        milestone_kinds,
        [
            events::JOB_CREATED,
            events::JOB_CLAIMED,
            task::STEP_STARTED,
            task::STEP_FINISHED
        ]
    );
    let after = h
        .queue
        .list_events_except(&job.id, task::STEP_LOG, milestones[1].id, 1)
        .await
        .unwrap();
    assert_eq!(after, milestones[2..3]);

    let unknown: &contract::JobId = &"0198c1f0-0000-7000-8000-00000000dead".parse().unwrap();
    assert_code(
        h.queue.list_latest_events(unknown, 5).await,
        "job_not_found",
    );
    assert_code(
        h.queue
            .list_events_except(unknown, task::STEP_LOG, 0, 5)
            .await,
        "job_not_found",
    );
    assert_code(h.queue.count_events(unknown).await, "job_not_found");
}

/// A jobs list shows `2/3` from the steps finished in the job's current attempt: a retried
/// job starts again from none.
pub async fn finished_steps_are_counted_for_the_current_attempt_only(h: Harness) {
    use contract::job::task;
    let retried = h.create(Spec::attempts(3)).await;
    let other = h.create(Spec::default()).await;
    let idle = h.create(Spec::default()).await;
    let first = h.claim_exactly("w1", &retried).await;
    for kind in [task::STEP_FINISHED, task::STEP_LOG, task::STEP_FINISHED] {
        h.queue
            .append_event(&retried.id, &fence(&first), step_event(kind))
            .await
            .unwrap();
    }
    let running = h.claim_exactly("w2", &other).await;
    h.queue
        .append_event(&other.id, &fence(&running), step_event(task::STEP_FINISHED))
        .await
        .unwrap();
    // A job id that names no job is ignored like one with no finished step.
    let ids = [retried.id, other.id, idle.id, uuid::Uuid::now_v7().into()];
    let counts = h.queue.steps_finished(&ids).await.unwrap();
    assert_eq!(counts.get(&retried.id), Some(&2));
    assert_eq!(counts.get(&other.id), Some(&1));
    assert_eq!(counts.get(&idle.id), None);

    h.queue
        .fail(&retried.id, &fence(&first), "flaky".into(), true)
        .await
        .unwrap();
    h.advance(std::time::Duration::from_secs(60));
    let second = h.claim_exactly("w3", &retried).await;
    assert_eq!(
        h.queue.steps_finished(&ids).await.unwrap().get(&retried.id),
        None
    );
    h.queue
        .append_event(
            &retried.id,
            &fence(&second),
            step_event(task::STEP_FINISHED),
        )
        .await
        .unwrap();
    assert_eq!(
        h.queue.steps_finished(&ids).await.unwrap().get(&retried.id),
        Some(&1)
    );
    assert!(h.queue.steps_finished(&[]).await.unwrap().is_empty());
}

/// Watchers that follow one job, from the start or from a cursor, while a worker writes:
/// each gets every event after its cursor exactly once, in order.
pub async fn watchers_following_a_job_each_get_every_event_after_their_cursor_once(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    let start = h.queue.list_events(&job.id, 0, 100).await.unwrap();
    let cursor = start[0].id;
    let mut watchers = Vec::new();
    for n in 0..12 {
        let after = if n % 3 == 0 { cursor } else { 0 };
        let follower = h.queue.follow_events(&job.id, after).await.unwrap();
        watchers.push((after, follower));
    }
    let writer = {
        let queue = h.queue.clone();
        let id = job.id;
        tokio::spawn(async move {
            for i in 0..40 {
                let event = NewEvent {
                    kind: "task.step.log".into(),
                    level: EventLevel::Info,
                    message: format!("line {i}"),
                    payload: json!({ "stepIndex": 0 }).as_object().unwrap().clone(),
                };
                queue.append_event(&id, &f, event).await.unwrap();
                if i % 8 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let mut readers = Vec::new();
    for (after, mut follower) in watchers {
        readers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while seen.len() < 42 - usize::from(after > 0) {
                let events =
                    tokio::time::timeout(std::time::Duration::from_secs(20), follower.next())
                        .await
                        .expect("the watcher hears of every event")
                        .unwrap();
                seen.extend(events.into_iter().map(|e| e.id));
            }
            (after, seen)
        }));
    }
    writer.await.unwrap();
    let all: Vec<i64> = h
        .queue
        .list_events(&job.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(all.len(), 42);
    for reader in readers {
        let (after, seen) = reader.await.unwrap();
        let expected: Vec<i64> = all.iter().copied().filter(|&id| id > after).collect();
        assert_eq!(seen, expected, "a watcher from {after}");
    }
}
