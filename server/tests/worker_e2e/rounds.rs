//! Follow-ups end to end: a job that ended is told one more thing, and its next round runs
//! only that, from the branch it pushed, and updates the same branch and pull request.

use contract::JobState;
use contract::job::{events, task};
use serde_json::json;

use super::{Setup, setup};

fn git(s: &Setup, args: &[&str]) -> String {
    worker::testing::run(std::path::Path::new(&s.remote), args)
}

#[tokio::test]
async fn a_follow_up_runs_only_its_steps_from_the_pushed_branch_and_updates_the_same_pull_request()
{
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Count",
                "publish": { "mode": "pr", "prTitle": "Count" },
                "steps": [{ "instructions": "@fake write count.txt one" }],
            }),
            json!({}),
        )
        .await;
    let (done, kinds) = s
        .until(&job, "round 1's end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{kinds:#?}");
    assert_eq!(done.round, 1);
    let artifacts = s.artifacts(&job).await;
    let context: serde_json::Value =
        serde_json::from_str(Setup::artifact(&artifacts, task::TASK_CONTEXT)).unwrap();
    let branch = context["git"]["workingBranch"]
        .as_str()
        .unwrap()
        .to_string();
    let first = git(&s, &["rev-parse", &branch]);

    // Someone else pushes to the job's branch meanwhile: the round keeps their commit.
    let other = s.tmp.path().join("other");
    worker::testing::run(
        s.tmp.path(),
        &["clone", "--quiet", &s.remote, other.to_str().unwrap()],
    );
    worker::testing::run(&other, &["checkout", "--quiet", &branch]);
    std::fs::write(other.join("review.txt"), "a reviewer's fix\n").unwrap();
    worker::testing::run(&other, &["add", "review.txt"]);
    worker::testing::run(&other, &["commit", "--quiet", "-m", "review"]);
    worker::testing::run(&other, &["push", "--quiet", "origin", &branch]);

    // Only an ended job takes a follow-up; a bad step is named.
    let bad = s
        .user
        .follow_up(&job.id, &json!([{ "instructions": "" }]))
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("steps[0]"), "{bad}");
    let queued = s
        .user
        .follow_up(
            &job.id,
            &json!([{ "instructions": "@fake write count.txt two" }]),
        )
        .await
        .unwrap();
    assert_eq!(queued.status, JobState::Queued);
    assert_eq!(queued.round, 2);
    assert_eq!(
        queued.resume_from.as_ref().unwrap().branch.as_deref(),
        Some(branch.as_str())
    );
    let again = s
        .user
        .follow_up(&job.id, &json!([{ "instructions": "more" }]))
        .await
        .unwrap_err();
    assert!(again.to_string().contains("job_state_conflict"), "{again}");

    let (done, kinds) = s
        .until(&job, "round 2's end", |j, kinds| {
            j.status.is_terminal()
                && kinds
                    .iter()
                    .any(|k| k.starts_with(events::JOB_FOLLOW_UP_REQUESTED))
        })
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert_eq!(done.round, 2);
    assert_eq!(done.id, job.id);
    // Step 1 ran once, in round 1; round 2 ran only its own step.
    let started: Vec<&String> = kinds
        .iter()
        .filter(|k| k.starts_with(task::STEP_STARTED))
        .collect();
    assert_eq!(started.len(), 2, "{kinds:#?}");
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with(task::ROUND_STARTED) && k.contains("round 2")),
        "{kinds:#?}"
    );
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with(task::ROUND_FINISHED) && k.contains("round 2 succeeded")),
        "{kinds:#?}"
    );
    let events = s.user.list_events(&job.id, None, Some(1000)).await.unwrap();
    let round_two: Vec<_> = events
        .iter()
        .filter(|e| e.kind == task::STEP_FINISHED && e.payload["stepIndex"] == 1)
        .collect();
    assert_eq!(round_two.len(), 1);
    assert_eq!(
        round_two[0].payload["round"], 2,
        "the round is on its step events"
    );

    // The same branch moved forward: round 1's commit, the reviewer's, then round 2's.
    assert_eq!(
        git(&s, &["show", &format!("{branch}:count.txt")]),
        "one\ntwo"
    );
    assert_eq!(
        git(&s, &["show", &format!("{branch}:review.txt")]),
        "a reviewer's fix"
    );
    let ancestry = git(&s, &["merge-base", "--is-ancestor", &first, &branch]);
    assert_eq!(ancestry, "");
    // The pull request is the same one, not a second.
    assert_eq!(
        done.result_summary.as_deref(),
        Some("pull request https://github.com/octo/hello/pull/7")
    );
    let gh_log = std::fs::read_to_string(s.tmp.path().join("gh.log")).unwrap();
    assert_eq!(gh_log.matches("pr create").count(), 2, "{gh_log}");
    let prepare = Setup::artifact(
        &s.artifacts(&job).await,
        &task::stage_log(task::STAGE_PREPARE),
    )
    .to_string();
    assert!(
        prepare.contains(&format!("round 2: on {branch} from the tip of {branch}")),
        "{prepare}"
    );
}
