//! Pause, resume and retry from a step (seed 003): guarded transitions that race the
//! worker, the rescuer and a cancel; each case in both orders where order matters.

use std::time::Duration;

use contract::Job;
use contract::JobState;
use contract::events::{CheckpointSaved, TaskEvent};
use contract::job::{events, task};
use queue::{Rescuer, RescuerConfig};
use serde_json::json;

use crate::harness::*;

/// A task of three steps, so a retry has somewhere to start.
async fn three_steps(h: &Harness) -> Job {
    let spec = json!({
        "type": "task",
        "maxAttempts": 3,
        "payload": {
            "repository": "octo/repo",
            "task": {
                "instructions": "Tidy up.",
                "steps": [
                    { "instructions": "one" },
                    { "instructions": "two" },
                    { "instructions": "three" }
                ],
                "publish": { "mode": "none" }
            }
        }
    });
    h.queue.create_job(&spec, Some("alice")).await.unwrap()
}

fn saved_after(index: usize) -> CheckpointSaved {
    CheckpointSaved {
        after_step: Some(index),
        after_iteration: None,
        base_commit: "0123abcd".into(),
        artifact: task::step_checkpoint(index),
        steps_done: None,
        round: None,
        branch: None,
    }
}

/// The worker holding `job` reports that the step at `index` started or ended (`kind`).
async fn step_at(h: &Harness, job: &Job, kind: &str, index: usize) {
    let mut event = step_event(kind);
    event.payload.insert("stepIndex".into(), json!(index));
    h.queue
        .append_event(&job.id, &fence(job), event)
        .await
        .unwrap();
}

/// The worker holding `job` reports the checkpoint after the step at `index`.
async fn checkpoint(h: &Harness, job: &Job, index: usize) {
    let saved = saved_after(index);
    let event = contract::NewEvent {
        kind: task::CHECKPOINT.into(),
        level: contract::EventLevel::Info,
        message: format!("checkpoint saved {}", saved.label()),
        payload: saved.payload(),
    };
    h.queue
        .append_event(&job.id, &fence(job), event)
        .await
        .unwrap();
}

pub async fn pausing_a_queued_job_pauses_it_at_once_and_no_claim_takes_it(h: Harness) {
    let job = h.create(Spec::default()).await;
    let paused = h
        .queue
        .request_pause(&job.id, Some("bob"), false)
        .await
        .unwrap();
    assert_eq!(paused.status, JobState::Paused);
    // The request it obeyed stays, and says why it paused.
    assert_eq!(
        paused
            .pause_requested
            .as_ref()
            .unwrap()
            .requested_by
            .as_deref(),
        Some("bob")
    );
    assert_eq!(
        paused.pause_reason,
        Some(contract::events::PauseReason::Operator)
    );
    assert_eq!(h.claim("w1").await, None);
    assert_eq!(
        h.event_kinds(&job).await.last().map(String::as_str),
        Some(events::JOB_PAUSED)
    );
    // A repeat is a no-op.
    let again = h.queue.request_pause(&job.id, None, true).await.unwrap();
    assert_eq!(again, paused);
    let resumed = h.queue.resume(&job.id, Some("bob"), None).await.unwrap();
    assert_eq!(resumed.status, JobState::Queued);
    h.claim_exactly("w1", &job).await;
}

pub async fn a_running_job_pauses_at_its_latest_checkpoint_and_releases_its_lease(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    checkpoint(&h, &claimed, 0).await;
    let marked = h
        .queue
        .request_pause(&job.id, Some("bob"), false)
        .await
        .unwrap();
    assert_eq!(marked.status, JobState::Running);
    let request = marked.pause_requested.clone().expect("the request is kept");
    assert_eq!(request.requested_by.as_deref(), Some("bob"));
    assert!(!request.immediate);
    // The worker hears of it on its heartbeat.
    let beat = h
        .queue
        .heartbeat(&job.id, &fence(&claimed), LEASE)
        .await
        .unwrap();
    assert!(beat.pause_requested.is_some());
    // An immediate request hastens it; a second soft one changes nothing.
    let hastened = h.queue.request_pause(&job.id, None, true).await.unwrap();
    assert!(hastened.pause_requested.as_ref().unwrap().immediate);
    let same = h.queue.request_pause(&job.id, None, false).await.unwrap();
    assert_eq!(same, hastened);
    checkpoint(&h, &claimed, 1).await;
    let paused = h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    assert_eq!(paused.status, JobState::Paused);
    assert_eq!(paused.claimed_by, None);
    assert_eq!(paused.lease_expires_at, None);
    assert!(paused.pause_requested.as_ref().unwrap().immediate);
    assert_eq!(
        h.get(&job).await.pause_reason,
        Some(contract::events::PauseReason::Operator)
    );
    assert_eq!(paused.resume_from, Some(saved_after(1)));
    // The same attempt acknowledging again gets the job back; the rescuer never sees it.
    let again = h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    assert_eq!(again, paused);
    h.advance(LEASE * 3);
    let rescued = Rescuer::new(h.queue.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    assert_eq!(rescued.total(), 0);
    assert_eq!(h.claim("w2").await, None);
    // Resumed, the next attempt carries where to start.
    let resumed = h.queue.resume(&job.id, Some("bob"), None).await.unwrap();
    assert_eq!(resumed.status, JobState::Queued);
    let events = h.queue.list_events(&job.id, 0, 100).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, events::JOB_RESUMED);
    assert_eq!(last.payload["fromStepIndex"], 2);
    let second = h.claim_exactly("w2", &job).await;
    assert_eq!(second.attempt, 2);
    assert_eq!(second.resume_from, Some(saved_after(1)));
}

pub async fn a_job_resumes_from_a_chosen_checkpoint_and_refuses_an_unknown_one(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    checkpoint(&h, &claimed, 0).await;
    checkpoint(&h, &claimed, 1).await;
    h.queue.request_pause(&job.id, None, true).await.unwrap();
    h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    let refused = assert_code(
        h.queue.resume(&job.id, None, Some("step-9")).await,
        "invalid_queue_payload",
    );
    assert!(refused.to_string().contains("checkpoint"), "{refused}");
    let resumed = h.queue.resume(&job.id, None, Some("step-1")).await.unwrap();
    assert_eq!(resumed.resume_from, Some(saved_after(0)));
}

pub async fn pause_then_lease_expiry_pauses_the_job_at_its_latest_checkpoint(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    checkpoint(&h, &claimed, 0).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    h.advance(LEASE + Duration::from_millis(1));
    let report = Rescuer::new(h.queue.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    assert_eq!(report.paused, vec![job.id]);
    let after = h.get(&job).await;
    assert_eq!(after.status, JobState::Paused);
    assert_eq!(after.resume_from, Some(saved_after(0)));
    // The worker that lost its lease can no longer acknowledge.
    assert_code(
        h.queue.ack_pause(&job.id, &fence(&claimed)).await,
        "job_ownership_mismatch",
    );
}

pub async fn lease_expiry_then_pause_pauses_the_requeued_job(h: Harness) {
    let job = three_steps(&h).await;
    h.claim_exactly("w1", &job).await;
    h.advance(LEASE + Duration::from_millis(1));
    Rescuer::new(h.queue.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    assert_eq!(h.get(&job).await.status, JobState::Queued);
    let paused = h.queue.request_pause(&job.id, None, false).await.unwrap();
    assert_eq!(paused.status, JobState::Paused);
}

pub async fn complete_wins_over_a_pause_requested_too_late(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    let done = h
        .queue
        .complete(&job.id, &fence(&claimed), None)
        .await
        .unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert_eq!(done.pause_requested, None);
    assert_conflict(
        h.queue.ack_pause(&job.id, &fence(&claimed)).await,
        JobState::Succeeded,
    );
    assert_conflict(
        h.queue.request_pause(&job.id, None, false).await,
        JobState::Succeeded,
    );
}

pub async fn a_paused_job_cannot_be_completed_by_its_old_worker(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    assert_code(
        h.queue.complete(&job.id, &fence(&claimed), None).await,
        "job_ownership_mismatch",
    );
    assert_eq!(h.get(&job).await.status, JobState::Paused);
}

pub async fn a_cancel_requested_before_the_pause_is_acknowledged_wins(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    // Once cancelling, a pause is refused.
    assert_conflict(
        h.queue.request_pause(&job.id, None, true).await,
        JobState::Running,
    );
    let ended = h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    assert_eq!(ended.status, JobState::Cancelled);
    assert_eq!(ended.pause_requested, None);
}

pub async fn resume_then_cancel_cancels_the_queued_job(h: Harness) {
    let job = three_steps(&h).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    h.queue.resume(&job.id, None, None).await.unwrap();
    let cancelled = h.queue.request_cancel(&job.id, None, None).await.unwrap();
    assert_eq!(cancelled.status, JobState::Cancelled);
    assert_eq!(h.claim("w1").await, None);
}

pub async fn cancel_then_resume_is_refused_and_the_job_stays_cancelled(h: Harness) {
    let job = three_steps(&h).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    let cancelled = h
        .queue
        .request_cancel(&job.id, Some("bob"), Some("not needed".into()))
        .await
        .unwrap();
    assert_eq!(cancelled.status, JobState::Cancelled);
    assert_eq!(
        h.event_kinds(&job).await.last().map(String::as_str),
        Some(events::JOB_CANCELLED)
    );
    assert_conflict(
        h.queue.resume(&job.id, None, None).await,
        JobState::Cancelled,
    );
    assert_eq!(h.claim("w1").await, None);
}

pub async fn resume_withdraws_a_pause_not_yet_obeyed(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    let running = h.queue.resume(&job.id, None, None).await.unwrap();
    assert_eq!(running.status, JobState::Running);
    assert_eq!(running.pause_requested, None);
    assert_conflict(
        h.queue.ack_pause(&job.id, &fence(&claimed)).await,
        JobState::Running,
    );
}

pub async fn a_retryable_failure_after_a_pause_request_pauses_instead_of_retrying(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    let paused = h
        .queue
        .fail(&job.id, &fence(&claimed), "clone failed".into(), true)
        .await
        .unwrap();
    assert_eq!(paused.status, JobState::Paused);
    assert_eq!(h.claim("w2").await, None);
}

pub async fn a_failed_job_retries_from_the_failed_step_with_the_checkpoint_before_it(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    for (kind, index) in [(task::STEP_STARTED, 0), (task::STEP_FINISHED, 0)] {
        let event = contract::NewEvent {
            payload: json!({ "stepIndex": index, "stepId": "step-1" })
                .as_object()
                .unwrap()
                .clone(),
            ..step_event(kind)
        };
        h.queue
            .append_event(&job.id, &fence(&claimed), event)
            .await
            .unwrap();
    }
    checkpoint(&h, &claimed, 0).await;
    let event = contract::NewEvent {
        payload: json!({ "stepIndex": 1, "stepId": "step-2" })
            .as_object()
            .unwrap()
            .clone(),
        ..step_event(task::STEP_FAILED)
    };
    h.queue
        .append_event(&job.id, &fence(&claimed), event)
        .await
        .unwrap();
    h.queue
        .fail(&job.id, &fence(&claimed), "step 2 failed".into(), false)
        .await
        .unwrap();
    // Not a running, paused or succeeded job; and not past the last step.
    assert_code(
        h.queue.retry_from_step(&job.id, None, Some(4)).await,
        "invalid_queue_payload",
    );
    // No checkpoint after step 2 was saved, so step 3 cannot start from one.
    let refused = assert_code(
        h.queue.retry_from_step(&job.id, None, Some(2)).await,
        "invalid_queue_payload",
    );
    assert!(refused.to_string().contains("fromStepIndex"), "{refused}");
    let retried = h
        .queue
        .retry_from_step(&job.id, Some("bob"), None)
        .await
        .unwrap();
    assert_eq!(retried.status, JobState::Queued);
    assert_eq!(retried.resume_from, Some(saved_after(0)));
    assert_eq!(retried.error_message, None);
    assert_eq!(retried.finished_at, None);
    let events = h.queue.list_events(&job.id, 0, 100).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, events::JOB_RETRY_REQUESTED);
    assert_eq!(last.payload["fromStepIndex"], 1);
    assert_eq!(last.payload["requestedBy"], "bob");
    let second = h.claim_exactly("w2", &job).await;
    assert_eq!(second.attempt, 2);
    assert_eq!(second.resume_from, Some(saved_after(0)));
    assert_conflict(
        h.queue.retry_from_step(&job.id, None, None).await,
        JobState::Running,
    );
}

pub async fn a_cancelled_job_retries_from_the_start_and_forgets_the_cancel(h: Harness) {
    let job = three_steps(&h).await;
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    let retried = h
        .queue
        .retry_from_step(&job.id, None, Some(0))
        .await
        .unwrap();
    assert_eq!(retried.status, JobState::Queued);
    assert_eq!(retried.resume_from, None);
    assert_eq!(retried.cancel_requested_at, None);
    let claimed = h.claim_exactly("w1", &job).await;
    assert!(!claimed.cancel_requested());
    let done = h
        .queue
        .complete(&job.id, &fence(&claimed), None)
        .await
        .unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert_conflict(
        h.queue.retry_from_step(&job.id, None, None).await,
        JobState::Succeeded,
    );
}

pub async fn a_job_awaiting_approval_holds_nothing_and_approving_queues_it_to_publish(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    checkpoint(&h, &claimed, 2).await;
    let waiting = h
        .queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    assert_eq!(waiting.status, JobState::AwaitingApproval);
    assert_eq!(waiting.lease_expires_at, None);
    assert_eq!(waiting.resume_from, Some(saved_after(2)));
    assert!(!waiting.approval.as_ref().unwrap().is_approved());
    // It is neither claimed nor rescued while it waits; asking again is a no-op.
    assert_eq!(h.claim("w2").await, None);
    let again = h
        .queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    assert_eq!(again, waiting);
    assert_conflict(
        h.queue.request_pause(&job.id, None, false).await,
        JobState::AwaitingApproval,
    );
    let approved = h.queue.approve(&job.id, Some("bob")).await.unwrap();
    assert_eq!(approved.status, JobState::Queued);
    let approval = approved.approval.clone().unwrap();
    assert_eq!(approval.approved_by.as_deref(), Some("bob"));
    assert_eq!(
        h.event_kinds(&job).await.last().map(String::as_str),
        Some(events::JOB_APPROVED)
    );
    let second = h.claim_exactly("w2", &job).await;
    assert!(second.approval.as_ref().unwrap().is_approved());
    assert_eq!(second.resume_from, Some(saved_after(2)));
    // The approved attempt is not asked again.
    assert_conflict(
        h.queue.request_approval(&job.id, &fence(&second)).await,
        JobState::Running,
    );
}

pub async fn rejecting_fails_the_job_with_the_reason_and_a_retry_asks_again(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    assert_code(
        h.queue.reject(&job.id, None, Some("a\0b".into())).await,
        "invalid_queue_payload",
    );
    let rejected = h
        .queue
        .reject(&job.id, Some("bob"), Some("wrong approach".into()))
        .await
        .unwrap();
    assert_eq!(rejected.status, JobState::Failed);
    assert_eq!(
        rejected.error_message.as_deref(),
        Some("rejected by bob: wrong approach")
    );
    assert_conflict(h.queue.approve(&job.id, None).await, JobState::Failed);
    let retried = h
        .queue
        .retry_from_step(&job.id, None, Some(0))
        .await
        .unwrap();
    assert_eq!(retried.approval, None);
}

pub async fn a_cancel_ends_a_job_awaiting_approval_and_wins_over_the_request(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    let ended = h
        .queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    assert_eq!(ended.status, JobState::Cancelled);
    let other = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &other).await;
    h.queue
        .request_approval(&other.id, &fence(&claimed))
        .await
        .unwrap();
    let cancelled = h.queue.request_cancel(&other.id, None, None).await.unwrap();
    assert_eq!(cancelled.status, JobState::Cancelled);
    assert_conflict(h.queue.approve(&other.id, None).await, JobState::Cancelled);
}

pub async fn a_worker_without_the_lease_cannot_ask_for_approval(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.advance(LEASE + Duration::from_millis(1));
    Rescuer::new(h.queue.clone(), RescuerConfig::default())
        .run_once()
        .await
        .unwrap();
    // Past the retry's backoff.
    h.advance(Duration::from_secs(3600));
    h.claim_exactly("w2", &job).await;
    assert_code(
        h.queue.request_approval(&job.id, &fence(&claimed)).await,
        "job_ownership_mismatch",
    );
}

pub async fn steps_appended_to_a_paused_job_are_checked_as_at_submit_and_kept(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    // A malformed step is refused, named by its place in the request.
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    let refused = assert_code(
        h.queue
            .append_steps(
                &job.id,
                None,
                &json!([{ "instructions": "four" }, { "model": "x" }]),
            )
            .await,
        "invalid_queue_payload",
    );
    assert!(refused.to_string().contains("steps[1]"), "{refused}");
    let appended = h
        .queue
        .append_steps(&job.id, Some("bob"), &json!("- [ ] four\n- [ ] five"))
        .await
        .unwrap();
    assert_eq!(appended.status, JobState::Paused);
    let steps = appended.payload["task"]["steps"].as_array().unwrap();
    let ids: Vec<&str> = steps.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["step-1", "step-2", "step-3", "step-4", "step-5"]);
    assert_eq!(steps[4]["instructions"], "five");
    assert_eq!(h.get(&job).await.payload, appended.payload);
    let events = h.queue.list_events(&job.id, 0, 100).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, events::JOB_STEPS_APPENDED);
    assert_eq!(last.payload["stepCount"], 5);
}

pub async fn appending_a_step_sends_a_job_back_from_the_gate_to_run_it(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    checkpoint(&h, &claimed, 2).await;
    h.queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    let sent_back = h
        .queue
        .append_steps(
            &job.id,
            Some("bob"),
            &json!([{ "instructions": "add the docs" }]),
        )
        .await
        .unwrap();
    assert_eq!(sent_back.status, JobState::Queued);
    assert_eq!(sent_back.approval, None);
    assert_eq!(sent_back.resume_from, Some(saved_after(2)));
    let second = h.claim_exactly("w2", &job).await;
    // The next attempt starts at the new step.
    let steps = contract::NormalizedTask::from_job(&second)
        .unwrap()
        .resolved_steps()
        .len();
    assert_eq!(second.resume_from.as_ref().unwrap().resume_step(steps), 3);
    // An ended job takes none.
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    h.queue.ack_cancel(&job.id, &fence(&second)).await.unwrap();
    assert_conflict(
        h.queue
            .append_steps(&job.id, None, &json!([{ "instructions": "x" }]))
            .await,
        JobState::Cancelled,
    );
}

pub async fn a_running_job_takes_steps_until_its_last_step_has_ended(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    step_at(&h, &claimed, task::STEP_STARTED, 0).await;
    let appended = h
        .queue
        .append_steps(&job.id, Some("bob"), &json!([{ "instructions": "four" }]))
        .await
        .unwrap();
    // Nothing else changes: the worker reads the steps at its next boundary.
    assert_eq!(appended.status, JobState::Running);
    assert_eq!(appended.attempt, claimed.attempt);
    assert_eq!(appended.claimed_by, claimed.claimed_by);
    let steps = appended.payload["task"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    for index in 0..3 {
        step_at(&h, &claimed, task::STEP_FINISHED, index).await;
    }
    // The fourth is still to run: more may come.
    h.queue
        .append_steps(&job.id, None, &json!("- [ ] five"))
        .await
        .unwrap();
    step_at(&h, &claimed, task::STEP_STARTED, 3).await;
    step_at(&h, &claimed, task::STEP_FINISHED, 3).await;
    step_at(&h, &claimed, task::STEP_STARTED, 4).await;
    step_at(&h, &claimed, task::STEP_FINISHED, 4).await;
    // Every step has ended: the worker has read them for the last time.
    let refused = assert_code(
        h.queue
            .append_steps(&job.id, None, &json!([{ "instructions": "six" }]))
            .await,
        "job_state_conflict",
    );
    assert!(
        refused.to_string().contains("steps have all run"),
        "{refused}"
    );
    assert_eq!(
        h.get(&job).await.payload["task"]["steps"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    let appends = h
        .queue
        .list_events(&job.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == events::JOB_STEPS_APPENDED)
        .count();
    assert_eq!(appends, 2);
}

pub async fn a_running_job_resumed_past_its_steps_takes_none(h: Harness) {
    let job = three_steps(&h).await;
    let claimed = h.claim_exactly("w1", &job).await;
    for index in 0..3 {
        step_at(&h, &claimed, task::STEP_STARTED, index).await;
        step_at(&h, &claimed, task::STEP_FINISHED, index).await;
    }
    checkpoint(&h, &claimed, 2).await;
    h.queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    h.queue.approve(&job.id, Some("bob")).await.unwrap();
    // Approved, it runs again only to publish: its steps are sealed.
    let publishing = h.claim_exactly("w2", &job).await;
    assert_eq!(publishing.status, JobState::Running);
    assert_conflict(
        h.queue
            .append_steps(&job.id, None, &json!([{ "instructions": "four" }]))
            .await,
        JobState::Running,
    );
}
