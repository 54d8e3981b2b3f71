//! Pause, resume and retry from a step, end to end: the worker stops at a boundary and the
//! job waits paused; the next attempt restores the checkpoint onto a fresh checkout and
//! runs only what is left; the published branch holds the work of every attempt.

use contract::JobState;
use contract::job::{events, task};
use serde_json::json;

use super::{Setup, setup};

/// The file `name` on branch `branch` of the remote, as published.
fn published(s: &Setup, branch: &str, name: &str) -> String {
    worker::testing::run(
        std::path::Path::new(&s.remote),
        &["show", &format!("{branch}:{name}")],
    )
}

fn started(kinds: &[String]) -> usize {
    kinds
        .iter()
        .filter(|k| k.starts_with(task::STEP_STARTED))
        .count()
}

#[tokio::test]
async fn a_failed_step_is_retried_from_its_checkpoint_and_the_earlier_work_is_published() {
    let s = setup().await;
    let flag = s.tmp.path().join("step-two-may-pass");
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "publish": { "mode": "branch" },
                "git": { "newBranch": "course/retry" },
                "steps": [
                    { "instructions": "@fake write one.txt first" },
                    { "instructions": format!("@fake fail-unless {}\n@fake write two.txt second", flag.display()) },
                ],
            }),
            json!({}),
        )
        .await;
    let (failed, kinds) = s
        .until(&job, "the failure", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(failed.status, JobState::Failed, "{kinds:#?}");
    std::fs::write(&flag, "").unwrap();
    // Step 3 does not exist; and step 2 is the default.
    let refused = s.user.retry_job(&job.id, Some(3)).await.unwrap_err();
    assert!(refused.to_string().contains("fromStepIndex"), "{refused}");
    let retried = s.user.retry_job(&job.id, None).await.unwrap();
    assert_eq!(retried.status, JobState::Queued);
    assert_eq!(retried.resume_from.as_ref().unwrap().after_step, Some(0));
    let (done, kinds) = s
        .until(&job, "the retry's end", |j, kinds| {
            j.status.is_terminal()
                && kinds
                    .iter()
                    .any(|k| k.starts_with(events::JOB_RETRY_REQUESTED))
        })
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(done.attempt, 2);
    // Step 1 ran once, in the first attempt; step 2 once in each.
    assert_eq!(started(&kinds), 3, "{kinds:#?}");
    let artifacts = s.artifacts(&job).await;
    let prepare = Setup::artifact(&artifacts, &task::stage_log(task::STAGE_PREPARE));
    assert!(
        prepare.contains("restored the checkpoint after step 1"),
        "{prepare}"
    );
    assert_eq!(published(&s, "course/retry", "one.txt"), "first");
    assert_eq!(published(&s, "course/retry", "two.txt"), "second");
    // The attempts are on the timeline, the second from the checkpoint.
    let events = s.user.list_events(&job.id, None, Some(1000)).await.unwrap();
    let timeline = contract::timeline::Timeline::from_events(2, &events);
    let attempts: Vec<Option<&str>> = timeline
        .attempts
        .iter()
        .map(|a| a.resumed_from.as_deref())
        .collect();
    assert_eq!(attempts, [None, Some("after step 1")]);
    assert!(
        timeline
            .steps
            .iter()
            .all(|s| s.state == contract::timeline::StepState::Succeeded)
    );
}

#[tokio::test]
async fn a_paused_job_waits_holding_nothing_and_resumes_at_the_next_step() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "publish": { "mode": "branch" },
                "git": { "newBranch": "course/pause" },
                "steps": [
                    { "instructions": "@fake sleep 1\n@fake write one.txt first" },
                    { "instructions": "@fake write two.txt second" },
                ],
            }),
            json!({}),
        )
        .await;
    s.until(&job, "step 1 running", |_, kinds| started(kinds) == 1)
        .await;
    let asked = s.user.pause_job(&job.id, false).await.unwrap();
    assert!(asked.pause_requested.is_some(), "{asked:?}");
    let (paused, kinds) = s
        .until(&job, "the pause", |j, _| j.status == JobState::Paused)
        .await;
    assert_eq!(paused.claimed_by, None);
    assert_eq!(paused.lease_expires_at, None);
    assert_eq!(
        paused.resume_from.as_ref().unwrap().after_step,
        Some(0),
        "{kinds:#?}"
    );
    assert_eq!(started(&kinds), 1, "step 2 must wait: {kinds:#?}");
    // Paused, it is not claimed again, and its workspace is gone.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(
        s.user.get_job(&job.id).await.unwrap().status,
        JobState::Paused
    );
    assert!(!s.tmp.path().join("work").join(job.id.to_string()).exists());
    s.user.resume_job(&job.id, None).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(started(&kinds), 2, "each step once: {kinds:#?}");
    assert_eq!(published(&s, "course/pause", "one.txt"), "first");
    assert_eq!(published(&s, "course/pause", "two.txt"), "second");
}

#[tokio::test]
async fn an_immediate_pause_stops_the_running_step_and_the_paused_job_can_be_cancelled() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "steps": [
                    { "instructions": "@fake write one.txt first" },
                    { "instructions": "@fake sleep 30" },
                ],
            }),
            json!({}),
        )
        .await;
    s.until(&job, "step 2 running", |_, kinds| started(kinds) == 2)
        .await;
    s.user.pause_job(&job.id, true).await.unwrap();
    let (paused, kinds) = s
        .until(&job, "the pause", |j, _| j.status == JobState::Paused)
        .await;
    assert!(
        kinds.iter().any(|k| k.starts_with(task::STEP_CANCELLED)),
        "the running step is stopped: {kinds:#?}"
    );
    assert_eq!(paused.resume_from.as_ref().unwrap().after_step, Some(0));
    // Cancel works from paused, and nothing resurrects it.
    let cancelled = s
        .user
        .cancel_job(&job.id, Some("changed my mind"))
        .await
        .unwrap();
    assert_eq!(cancelled.status, JobState::Cancelled);
    assert!(s.user.resume_job(&job.id, None).await.is_err());
}

#[tokio::test]
async fn an_immediate_pause_mid_step_then_resume_runs_that_step_again_on_the_work_before_it() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "publish": { "mode": "branch" },
                "git": { "newBranch": "course/pause-now" },
                "steps": [
                    { "instructions": "@fake write one.txt first" },
                    { "instructions": "@fake write two.txt second\n@fake sleep 4" },
                ],
            }),
            json!({}),
        )
        .await;
    s.until(&job, "step 2 running", |_, kinds| started(kinds) == 2)
        .await;
    s.user.pause_job(&job.id, true).await.unwrap();
    let (paused, _) = s
        .until(&job, "the pause", |j, _| j.status == JobState::Paused)
        .await;
    assert_eq!(paused.resume_from.as_ref().unwrap().after_step, Some(0));
    s.user.resume_job(&job.id, None).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(started(&kinds), 3, "step 1 once, step 2 again: {kinds:#?}");
    // Both halves: step 1's work restored from its checkpoint, step 2's from its second
    // run only (the stopped run's half-done write is not carried over).
    assert_eq!(published(&s, "course/pause-now", "one.txt"), "first");
    assert_eq!(published(&s, "course/pause-now", "two.txt"), "second");
}

#[tokio::test]
async fn a_task_that_needs_approval_waits_before_publishing_and_publishes_once_approved() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "publish": { "mode": "branch", "approval": "required" },
                "git": { "newBranch": "course/approval" },
                "steps": [{ "instructions": "@fake write one.txt first" }],
            }),
            json!({}),
        )
        .await;
    assert_eq!(job.payload["task"]["publish"]["approval"], "required");
    let (waiting, kinds) = s
        .until(&job, "the gate", |j, _| {
            j.status == JobState::AwaitingApproval
        })
        .await;
    assert_eq!(waiting.lease_expires_at, None);
    assert!(
        !kinds.iter().any(|k| k.contains(task::STAGE_PUBLISH)),
        "nothing is published before approval: {kinds:#?}"
    );
    let branches = worker::testing::run(std::path::Path::new(&s.remote), &["branch"]);
    assert!(!branches.contains("course/approval"), "{branches}");
    // The operator reviews the diff.
    let artifacts = s.artifacts(&job).await;
    let changes = Setup::artifact(&artifacts, task::CHANGES_PATCH);
    assert!(changes.contains("+first"), "{changes}");
    let approved = s.user.approve_job(&job.id).await.unwrap();
    assert_eq!(approved.status, JobState::Queued);
    let (done, kinds) = s
        .until(&job, "the publish", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(started(&kinds), 1, "the step ran once: {kinds:#?}");
    assert_eq!(published(&s, "course/approval", "one.txt"), "first");
    // Nothing is left to approve or reject.
    assert!(s.user.reject_job(&job.id, Some("late")).await.is_err());
}

#[tokio::test]
async fn a_rejected_task_fails_with_the_reason_and_publishes_nothing() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "publish": { "mode": "branch", "approval": "required" },
                "git": { "newBranch": "course/rejected" },
                "steps": [{ "instructions": "@fake write one.txt first" }],
            }),
            json!({}),
        )
        .await;
    s.until(&job, "the gate", |j, _| {
        j.status == JobState::AwaitingApproval
    })
    .await;
    let rejected = s
        .user
        .reject_job(&job.id, Some("not this way"))
        .await
        .unwrap();
    assert_eq!(rejected.status, JobState::Failed);
    assert_eq!(
        rejected.error_message.as_deref(),
        Some("rejected by operator: not this way")
    );
    let branches = worker::testing::run(std::path::Path::new(&s.remote), &["branch"]);
    assert!(!branches.contains("course/rejected"), "{branches}");
}

#[tokio::test]
async fn a_job_sent_back_from_approval_with_a_step_runs_only_that_step_and_asks_again() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "publish": { "mode": "branch", "approval": "required" },
                "git": { "newBranch": "course/sent-back" },
                "steps": [{ "instructions": "@fake write one.txt first" }],
            }),
            json!({}),
        )
        .await;
    s.until(&job, "the gate", |j, _| {
        j.status == JobState::AwaitingApproval
    })
    .await;
    let sent_back = s
        .user
        .append_steps(&job.id, &json!("- [ ] @fake write two.txt second"))
        .await
        .unwrap();
    assert_eq!(sent_back.status, JobState::Queued);
    let (again, kinds) = s
        .until(&job, "the gate again", |j, kinds| {
            j.status == JobState::AwaitingApproval && started(kinds) == 2
        })
        .await;
    assert_eq!(again.attempt, 2, "{kinds:#?}");
    let changes = s.artifacts(&job).await;
    let patch = Setup::artifact(&changes, task::CHANGES_PATCH);
    assert!(
        patch.contains("+first") && patch.contains("+second"),
        "{patch}"
    );
    s.user.approve_job(&job.id).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the publish", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{kinds:#?}");
    assert_eq!(started(&kinds), 2, "each step ran once: {kinds:#?}");
    assert_eq!(published(&s, "course/sent-back", "one.txt"), "first");
    assert_eq!(published(&s, "course/sent-back", "two.txt"), "second");
}

#[tokio::test]
async fn a_step_appended_while_the_last_step_runs_runs_in_the_same_attempt() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Build",
                "publish": { "mode": "branch" },
                "git": { "newBranch": "course/appended" },
                "steps": [{ "instructions": "@fake sleep 2\n@fake write one.txt first" }],
            }),
            json!({}),
        )
        .await;
    s.until(&job, "step 1 running", |_, kinds| started(kinds) == 1)
        .await;
    let appended = s
        .user
        .append_steps(&job.id, &json!("- [ ] @fake write two.txt second"))
        .await
        .unwrap();
    assert_eq!(appended.status, JobState::Running);
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(done.attempt, 1, "no second attempt: {kinds:#?}");
    assert_eq!(started(&kinds), 2, "each step once: {kinds:#?}");
    // The plan was said again with the new step, after the append and before it ran.
    let plans: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| k.starts_with(task::STEPS_PLAN))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(plans.len(), 2, "{kinds:#?}");
    let appended_at = kinds
        .iter()
        .position(|k| k.starts_with(events::JOB_STEPS_APPENDED))
        .unwrap();
    assert!(appended_at < plans[1], "{kinds:#?}");
    assert!(kinds[plans[1]].contains("2 step(s)"), "{kinds:#?}");
    let execute = s.artifacts(&job).await;
    let log = Setup::artifact(&execute, &task::stage_log(task::STAGE_EXECUTE));
    assert!(log.contains("1 step(s) appended: 2 in all"), "{log}");
    assert_eq!(published(&s, "course/appended", "one.txt"), "first");
    assert_eq!(published(&s, "course/appended", "two.txt"), "second");
    // Its steps have all run: the job takes no more, and says why.
    let refused = s
        .user
        .append_steps(&job.id, &json!("- [ ] too late"))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("ended"), "{refused}");
}
