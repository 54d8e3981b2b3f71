//! Follow-ups: a job that succeeded or failed is queued again as its next round, with the
//! steps it adds, to run only those from the work it last saved; nothing else takes one.

use contract::events::{CheckpointSaved, TaskEvent};
use contract::job::{events, task};
use contract::{Job, JobState};
use serde_json::json;

use crate::harness::*;

async fn with_completion(h: &Harness) -> Job {
    let spec = json!({ "type": "task", "payload": { "repository": "octo/repo", "task": {
        "instructions": "Tidy up.",
        "steps": [{ "instructions": "one" }, { "instructions": "two" }],
        // Criteria and no check: the stored task carries the loop's default limit.
        "completion": { "criteria": "tidy" },
        "publish": { "mode": "none" },
    } } });
    h.queue.create_job(&spec, Some("alice")).await.unwrap()
}

async fn saved_after_step(h: &Harness, job: &Job, index: usize) {
    let saved = CheckpointSaved {
        after_step: Some(index),
        after_iteration: None,
        base_commit: "0123abcd".into(),
        artifact: task::step_checkpoint(index),
        steps_done: None,
        round: None,
        branch: None,
    };
    let event = contract::NewEvent {
        kind: task::CHECKPOINT.into(),
        payload: saved.payload(),
        ..contract::NewEvent::default()
    };
    h.queue
        .append_event(&job.id, &fence(job), event)
        .await
        .unwrap();
}

pub async fn a_follow_up_queues_the_ended_job_as_its_next_round_to_run_only_its_steps(h: Harness) {
    let job = with_completion(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    for index in 0..2 {
        let finished = contract::NewEvent {
            kind: task::STEP_FINISHED.into(),
            payload: json!({ "stepIndex": index, "stepId": format!("step-{}", index + 1) })
                .as_object()
                .cloned()
                .unwrap(),
            ..contract::NewEvent::default()
        };
        h.queue
            .append_event(&job.id, &fence(&claimed), finished)
            .await
            .unwrap();
    }
    saved_after_step(&h, &claimed, 1).await;
    h.queue
        .complete(&job.id, &fence(&claimed), Some("done".into()))
        .await
        .unwrap();

    let next = h
        .queue
        .follow_up(
            &job.id,
            Some("bob"),
            &json!({ "instructions": "and the docs" }),
        )
        .await
        .unwrap();
    assert_eq!(next.id, job.id);
    assert_eq!(next.status, JobState::Queued);
    assert_eq!(next.round, 2);
    assert_eq!(next.result_summary, None);
    assert_eq!(next.finished_at, None);
    let steps = next.payload["task"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[2]["instructions"], "and the docs");
    assert_eq!(
        next.payload["task"]["rounds"],
        json!([{ "round": 2, "fromStep": 2 }])
    );
    let start = next.resume_from.clone().unwrap();
    assert_eq!(start.round, Some(2));
    assert_eq!(start.steps_done, Some(2));
    assert_eq!(start.base_commit, "0123abcd");
    assert_eq!(start.artifact, task::step_checkpoint(1));
    assert_eq!(start.branch, None, "nothing was pushed");
    assert_eq!(start.resume_step(3), 2, "only the new step runs");
    assert_eq!(start.id(), "round-2");
    let told = h.queue.list_events(&job.id, 0, 1000).await.unwrap();
    let asked = told
        .iter()
        .rfind(|e| e.kind == events::JOB_FOLLOW_UP_REQUESTED)
        .unwrap();
    assert_eq!(asked.payload["round"], 2);
    assert_eq!(asked.payload["requestedBy"], "bob");
    assert_eq!(asked.payload["fromStepIndex"], 2);

    // Read back and claimed, it is round 2; a second follow-up waits for it to end.
    assert_eq!(h.get(&job).await.round, 2);
    let again = h.claim_exactly("w2", &job).await;
    assert_eq!(again.round, 2);
    assert_conflict(
        h.queue
            .follow_up(&job.id, None, &json!({ "instructions": "more" }))
            .await,
        JobState::Running,
    );
    h.queue
        .fail(&job.id, &fence(&again), "broke".into(), false)
        .await
        .unwrap();
    // Retried from its own first step, the round starts where it started, not behind it.
    let retried = h.queue.retry_from_step(&job.id, None, None).await.unwrap();
    let start = retried.resume_from.clone().unwrap();
    assert_eq!((start.round, start.steps_done), (Some(2), Some(2)));
    assert_eq!(start.artifact, task::step_checkpoint(1));
    assert_eq!(retried.round, 2);
    let again = h.claim_exactly("w3", &job).await;
    h.queue
        .fail(&job.id, &fence(&again), "broke again".into(), false)
        .await
        .unwrap();
    // A failed round takes one too, as round 3, its steps after round 2's.
    let third = h
        .queue
        .follow_up(
            &job.id,
            None,
            &json!({ "steps": "- [ ] fix it\n- [ ] test it" }),
        )
        .await
        .unwrap();
    assert_eq!(third.round, 3);
    assert_eq!(
        third.payload["task"]["rounds"],
        json!([{ "round": 2, "fromStep": 2 }, { "round": 3, "fromStep": 3 }])
    );
    let task = contract::NormalizedTask::from_job(&third).unwrap();
    let rounds: Vec<u32> = task.resolved_steps().iter().map(|s| s.round).collect();
    assert_eq!(rounds, [1, 1, 2, 3, 3]);
}

pub async fn only_a_job_that_succeeded_or_failed_takes_a_follow_up_and_its_steps_are_checked(
    h: Harness,
) {
    let job = h.create(Spec::default()).await;
    let body = json!({ "instructions": "more" });
    let queued = h.queue.follow_up(&job.id, None, &body).await;
    let refused = assert_code(queued, "job_state_conflict");
    assert!(refused.to_string().contains("/steps"), "{refused}");
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    let cancelled = assert_code(
        h.queue.follow_up(&job.id, None, &body).await,
        "job_state_conflict",
    );
    assert!(cancelled.to_string().contains("/retry"), "{cancelled}");

    let done = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &done).await;
    h.queue
        .complete(&done.id, &fence(&claimed), None)
        .await
        .unwrap();
    for (body, path) in [
        (json!({}), "steps"),
        (json!({ "instructions": "  " }), "instructions"),
        (json!({ "instructions": "a", "steps": [] }), "instructions"),
        (json!({ "step": "a" }), "step"),
        (json!({ "steps": [{ "model": "x" }] }), "steps[0]"),
        (json!([1]), ""),
    ] {
        let error = assert_code(
            h.queue.follow_up(&done.id, None, &body).await,
            "invalid_queue_payload",
        );
        let QueueErrorPaths(paths) = QueueErrorPaths::of(&error);
        assert!(paths.iter().any(|p| p.starts_with(path)), "{body}: {error}");
    }
    assert_eq!(
        h.get(&done).await.status,
        JobState::Succeeded,
        "nothing changed"
    );
    // Nothing was saved: the round starts afresh, at its own steps.
    let next = h
        .queue
        .follow_up(&done.id, None, &json!({ "instructions": "go" }))
        .await
        .unwrap();
    let start = next.resume_from.unwrap();
    assert_eq!(
        (start.base_commit.as_str(), start.artifact.as_str()),
        ("", "")
    );
    assert_eq!(start.steps_done, Some(1));
    let kinds = h.event_kinds(&done).await;
    assert_eq!(
        kinds.last().map(String::as_str),
        Some(events::JOB_FOLLOW_UP_REQUESTED)
    );
}

struct QueueErrorPaths(Vec<String>);

impl QueueErrorPaths {
    fn of(error: &queue::QueueError) -> QueueErrorPaths {
        match error {
            queue::QueueError::Invalid(errors) => {
                QueueErrorPaths(errors.iter().map(|e| e.path.clone()).collect())
            }
            other => panic!("not a refusal by field: {other}"),
        }
    }
}

pub async fn a_job_whose_history_was_deleted_takes_no_follow_up(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .complete(&job.id, &fence(&claimed), None)
        .await
        .unwrap();
    h.advance(std::time::Duration::from_secs(31 * 24 * 60 * 60));
    let report = queue::Retention::new(h.queue.clone(), queue::RetentionConfig::default())
        .run_once()
        .await
        .unwrap();
    assert_eq!(report.history_deleted, [job.id]);
    let refused = assert_code(
        h.queue
            .follow_up(&job.id, None, &json!({ "instructions": "more" }))
            .await,
        "job_state_conflict",
    );
    assert!(
        refused.to_string().contains("history was deleted"),
        "{refused}"
    );
    assert_eq!(h.get(&job).await.status, JobState::Succeeded);
}
