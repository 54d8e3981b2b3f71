//! Pull request watches: a completion that wants feedback is watched, written with it; one
//! replica at a time looks; a look is settled only under its own lease; a cause of
//! feedback makes one round however many replicas see it; a person is asked once.

use std::time::Duration;

use contract::events::NeedsAttention;
use contract::{Job, JobState};
use queue::{Looked, Watch, events};
use serde_json::json;

use crate::harness::*;

const LEASE: Duration = Duration::from_secs(30);

async fn with_feedback(h: &Harness, feedback: bool) -> Job {
    let mut publish = json!({ "mode": "pr" });
    if feedback {
        publish["feedback"] = json!({ "maxRounds": 2 });
    }
    let spec = json!({ "type": "task", "payload": { "repository": "octo/repo", "task": {
        "instructions": "Fix the build.",
        "publish": publish,
    } } });
    h.queue.create_job(&spec, Some("alice")).await.unwrap()
}

async fn completed(h: &Harness, job: &Job) {
    let claimed = h.claim_exactly("w1", job).await;
    h.queue
        .complete(&job.id, &fence(&claimed), Some("pull request".into()))
        .await
        .unwrap();
}

async fn look(h: &Harness, owner: &str) -> Vec<Watch> {
    h.queue.claim_watches(owner, LEASE, 10).await.unwrap()
}

fn later(h: &Harness, after: Duration, pull: &str) -> Looked {
    Looked::Later {
        next_at: h.queue.now() + chrono::Duration::from_std(after).unwrap(),
        quiet: 1,
        pull: Some(pull.into()),
    }
}

pub async fn a_completion_that_wants_feedback_is_watched_by_one_replica_at_a_time(h: Harness) {
    let plain = with_feedback(&h, false).await;
    completed(&h, &plain).await;
    assert_eq!(h.queue.watch_state(&plain.id).await.unwrap(), None);

    let job = with_feedback(&h, true).await;
    let claimed = h.claim_exactly("w1", &job).await;
    // A failed attempt is not a completion.
    h.queue
        .fail(&job.id, &fence(&claimed), "flaky".into(), true)
        .await
        .unwrap();
    assert_eq!(h.queue.watch_state(&job.id).await.unwrap(), None);
    h.advance(Duration::from_secs(3600));
    completed(&h, &job).await;
    let completion = h
        .queue
        .list_events(&job.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .rfind(|e| e.kind == events::JOB_COMPLETED)
        .unwrap();
    assert_eq!(
        completion.payload["feedback"],
        json!({ "ci": true, "reviews": true, "maxRounds": 2 })
    );
    assert_eq!(
        h.queue.watch_state(&job.id).await.unwrap().as_deref(),
        Some("watching")
    );

    let seen = look(&h, "r1").await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (seen[0].job_id, seen[0].attempt, seen[0].pull.clone()),
        (job.id, 1, None)
    );
    assert!(look(&h, "r2").await.is_empty(), "leased to r1");

    let pull = "https://github.com/octo/repo/pull/7";
    assert!(
        h.queue
            .settle_watch(&seen[0], "r1", &later(&h, Duration::from_secs(60), pull))
            .await
            .unwrap()
    );
    assert!(look(&h, "r2").await.is_empty(), "not due");
    // GitHub said the pull request changed: it is due now.
    assert_eq!(h.queue.nudge_pull(pull).await.unwrap(), 1);
    assert_eq!(
        h.queue
            .nudge_pull("https://github.com/octo/repo/pull/8")
            .await
            .unwrap(),
        0
    );
    let again = look(&h, "r2").await;
    assert_eq!(
        (again[0].attempt, again[0].pull.as_deref()),
        (2, Some(pull))
    );
    // r1's look is over: its word is not written.
    assert!(
        !h.queue
            .settle_watch(&seen[0], "r1", &Looked::Closed)
            .await
            .unwrap()
    );

    // A lease whose holder went silent is taken over when it ends.
    h.advance(LEASE + Duration::from_secs(1));
    let taken = look(&h, "r3").await;
    assert_eq!(taken[0].attempt, 3);
    assert!(
        !h.queue
            .settle_watch(&again[0], "r2", &Looked::Closed)
            .await
            .unwrap()
    );
    assert!(
        h.queue
            .settle_watch(&taken[0], "r3", &Looked::Closed)
            .await
            .unwrap()
    );
    assert_eq!(
        h.queue.watch_state(&job.id).await.unwrap().as_deref(),
        Some("closed")
    );
    h.advance(Duration::from_secs(3600));
    assert!(look(&h, "r1").await.is_empty(), "a closed watch is done");
}

pub async fn each_cause_of_feedback_makes_one_round(h: Harness) {
    let job = with_feedback(&h, true).await;
    completed(&h, &job).await;
    let causes = vec!["check_run:41".to_string()];
    let (a, b) = tokio::join!(
        h.queue
            .feedback_round(&job.id, causes.clone(), "Fix the failing test."),
        h.queue
            .feedback_round(&job.id, causes.clone(), "Fix the failing test."),
    );
    let made: Vec<Job> = [a.unwrap(), b.unwrap()].into_iter().flatten().collect();
    assert_eq!(made.len(), 1, "one round of two replicas");
    let round = &made[0];
    assert_eq!((round.status, round.round), (JobState::Queued, 2));
    assert_eq!(
        round.payload["task"]["rounds"],
        json!([{ "round": 2, "fromStep": 1, "causes": ["check_run:41"] }])
    );
    // The round ran and the job completed again: the same cause is taken already, a new
    // one makes the next round.
    completed(&h, &round.clone()).await;
    assert_eq!(
        h.queue
            .feedback_round(&job.id, causes.clone(), "again")
            .await
            .unwrap(),
        None
    );
    let next = h
        .queue
        .feedback_round(
            &job.id,
            vec!["check_run:41".into(), "review:9".into()],
            "Rename it.",
        )
        .await
        .unwrap()
        .expect("a new cause");
    assert_eq!(next.round, 3);
    assert_eq!(
        next.payload["task"]["rounds"][1]["causes"],
        json!(["review:9"]),
        "only what no round took"
    );
    let steps = next.payload["task"]["steps"].as_array().unwrap();
    assert_eq!(steps.last().unwrap()["instructions"], "Rename it.");
    // A round while the job is under way is refused as any follow-up is.
    let refused = h
        .queue
        .feedback_round(&job.id, vec!["review:10".into()], "more")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), contract::api::ErrorCode::JobStateConflict);
}

pub async fn a_person_is_asked_once_and_a_later_completion_watches_again(h: Harness) {
    h.queue.listen_for_notifications("r1").await.unwrap();
    let job = with_feedback(&h, true).await;
    completed(&h, &job).await;
    let seen = look(&h, "r1").await;
    let asked = NeedsAttention {
        reason: "the pull request still fails after 2 rounds".into(),
        pull_request: Some("https://github.com/octo/repo/pull/7".into()),
        rounds: 2,
        waiting: vec!["check run test failed".into()],
    };
    let first = h
        .queue
        .needs_attention(&seen[0], "r1", &asked)
        .await
        .unwrap();
    assert_eq!(first.map(|j| j.status), Some(JobState::Succeeded));
    assert_eq!(
        h.queue
            .needs_attention(&seen[0], "r1", &asked)
            .await
            .unwrap(),
        None,
        "said once"
    );
    let kinds = h.event_kinds(&job).await;
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == events::JOB_NEEDS_ATTENTION)
            .count(),
        1
    );
    let said = h
        .queue
        .list_events(&job.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == events::JOB_NEEDS_ATTENTION)
        .unwrap();
    assert_eq!(said.payload["rounds"], 2);
    assert_eq!(said.payload["waiting"], json!(["check run test failed"]));
    let told: Vec<String> = h
        .queue
        .claim_notifications("r1", LEASE, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.event)
        .collect();
    assert_eq!(told, ["job.ended", "job.needs_attention"]);
    assert_eq!(
        h.queue.watch_state(&job.id).await.unwrap().as_deref(),
        Some("needs_attention")
    );
    let other = with_feedback(&h, false).await;
    let asking = h
        .queue
        .needing_attention(&[job.id, other.id])
        .await
        .unwrap();
    assert_eq!(asking.into_iter().collect::<Vec<_>>(), [job.id]);
    assert!(look(&h, "r1").await.is_empty());

    // A person followed up by hand; its completion watches the pull request again.
    let round = h
        .queue
        .follow_up(
            &job.id,
            Some("alice"),
            &json!({ "instructions": "fixed by hand" }),
        )
        .await
        .unwrap();
    completed(&h, &round).await;
    assert_eq!(
        h.queue.watch_state(&job.id).await.unwrap().as_deref(),
        Some("watching")
    );
    assert!(
        h.queue
            .needing_attention(&[job.id])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(look(&h, "r2").await.len(), 1);
}
