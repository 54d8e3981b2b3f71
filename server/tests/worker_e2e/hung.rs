//! A git or gh that hangs, under the real claim loop and API: a cancel request ends the job
//! cancelled within a second, whether the clone waits on a remote that never answers
//! (prepare) or `gh pr create` never returns (publish).

use std::time::{Duration, Instant};

use contract::JobState;
use contract::job::task;
use serde_json::json;
use worker::testing::{group_members, hanging_gh, silent_remote};

use super::{setup, setup_with};

#[tokio::test]
async fn a_cancel_during_a_clone_that_hangs_ends_the_job_cancelled_within_a_second() {
    let s = setup().await;
    let (url, accepted) = silent_remote();
    let job = s
        .submit_task(
            json!({ "instructions": "@fake write never.txt x" }),
            json!({ "repository": url }),
        )
        .await;
    // The worker claimed the job and its git is connected, waiting for an answer. The
    // connection is held open: closed, it would be an answer (and fail the clone).
    let (_connection, _accepted) = tokio::task::spawn_blocking(move || {
        let connection = accepted.recv_timeout(Duration::from_secs(20));
        (connection.expect("git connected to the remote"), accepted)
    })
    .await
    .unwrap();

    let asked = Instant::now();
    s.user.cancel_job(&job.id, None).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the cancel", |j, _| j.status.is_terminal())
        .await;
    let took = asked.elapsed();
    eprintln!("cancel request during a hung clone → job cancelled: {took:?}");
    assert_eq!(done.status, JobState::Cancelled, "{done:?} {kinds:#?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with(task::STAGE_FINISHED) && k.ends_with("cancelled")),
        "{kinds:#?}"
    );
}

#[tokio::test]
async fn a_cancel_during_a_gh_that_hangs_ends_the_job_cancelled_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("gh.pid");
    let gh = hanging_gh(dir.path(), &pidfile);
    let s = setup_with(|config| config.stages.gh = gh).await;
    let job = s
        .submit_task(
            json!({
                "instructions": "@fake write greeting.txt hello",
                "publish": { "mode": "pr" },
            }),
            json!({}),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let gh = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "gh never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let asked = Instant::now();
    s.user.cancel_job(&job.id, None).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the cancel", |j, _| j.status.is_terminal())
        .await;
    let took = asked.elapsed();
    eprintln!("cancel request during a hung gh → job cancelled: {took:?}");
    assert_eq!(done.status, JobState::Cancelled, "{done:?} {kinds:#?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(group_members(gh), [], "left of gh's group (Z: a zombie)");
}
