//! The webhook outbox: while a replica that posts webhooks listens, a notification exists
//! exactly when a job's end (or its wait for an operator's approval) does, written with it;
//! one replica at a time holds it; a try is settled only under its own claim.

use std::time::Duration;

use contract::JobState;
use queue::{Completion, Notice, Settled, events};

use crate::harness::*;

const LEASE: Duration = Duration::from_secs(30);

async fn claim(h: &Harness, owner: &str) -> Vec<Notice> {
    h.queue.claim_notifications(owner, LEASE, 10).await.unwrap()
}

async fn pending(h: &Harness) -> i64 {
    h.queue.notifications_pending().await.unwrap()
}

/// The id of `job`'s event of `kind`, the one a notice names.
async fn event_id(h: &Harness, job: &contract::Job, kind: &str) -> i64 {
    h.queue
        .list_events(&job.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == kind)
        .unwrap()
        .id
}

/// A replica that posts webhooks says so.
async fn listening(h: &Harness) {
    h.queue.listen_for_notifications("r1").await.unwrap();
}

pub async fn a_job_s_end_is_in_the_outbox_with_its_event_and_nothing_else_is(h: Harness) {
    listening(&h).await;
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    // A failed attempt that is tried again has not ended.
    h.queue
        .fail(&job.id, &fence(&claimed), "flaky".into(), true)
        .await
        .unwrap();
    assert_eq!(pending(&h).await, 0);
    h.advance(Duration::from_secs(3600));
    // The replica said again that it listens, as it does every minute.
    listening(&h).await;
    let again = h.claim_exactly("w1", &job).await;
    h.queue
        .fail(&job.id, &fence(&again), "broken".into(), false)
        .await
        .unwrap();
    assert_eq!(pending(&h).await, 1);
    let notices = claim(&h, "r1").await;
    assert_eq!(notices.len(), 1, "{notices:#?}");
    let notice = &notices[0];
    assert_eq!(notice.job_id, job.id);
    assert_eq!(
        notice.event_id,
        event_id(&h, &job, events::JOB_FAILED).await
    );
    assert_eq!(notice.event, "job.ended");
    assert_eq!(notice.status, JobState::Failed);
    assert_eq!(notice.attempt, 1);
    assert!(notice.settled.is_empty());

    // A queued job cancelled ends at once, and a wait for approval is told as such.
    let cancelled = h.create(Spec::default()).await;
    h.queue
        .request_cancel(&cancelled.id, Some("alice"), None)
        .await
        .unwrap();
    let waiting = h.create(Spec::default()).await;
    let running = h.claim_exactly("w1", &waiting).await;
    h.queue
        .request_approval(&waiting.id, &fence(&running))
        .await
        .unwrap();
    let told: Vec<(String, JobState)> = claim(&h, "r1")
        .await
        .into_iter()
        .map(|n| (n.event, n.status))
        .collect();
    assert_eq!(
        told,
        [
            ("job.ended".to_string(), JobState::Cancelled),
            (
                "job.awaiting_approval".to_string(),
                JobState::AwaitingApproval
            ),
        ]
    );
}

pub async fn a_notification_is_held_by_one_replica_and_settled_only_under_its_claim(h: Harness) {
    listening(&h).await;
    let job = h.create(Spec::default()).await;
    h.queue
        .request_cancel(&job.id, Some("alice"), None)
        .await
        .unwrap();
    let first = claim(&h, "r1").await.remove(0);
    // Leased: nobody else gets it, and nobody else settles it.
    assert!(claim(&h, "r2").await.is_empty());
    assert!(
        !h.queue
            .settle_notification(&first, "r2", &Settled::Done)
            .await
            .unwrap()
    );
    // One webhook done with, the rest tried again in ten seconds.
    let later = Settled::Later {
        settled: vec!["server:aa".into()],
        next_at: h.queue.now() + chrono::Duration::seconds(10),
    };
    assert!(
        h.queue
            .settle_notification(&first, "r1", &later)
            .await
            .unwrap()
    );
    assert!(claim(&h, "r2").await.is_empty(), "not due yet");
    h.advance(Duration::from_secs(10));
    let second = claim(&h, "r2").await.remove(0);
    assert_eq!(second.id, first.id);
    assert_eq!(second.attempt, 2);
    assert_eq!(second.settled, ["server:aa"]);
    // The first claim is spent: its late word changes nothing.
    assert!(
        !h.queue
            .settle_notification(&first, "r1", &Settled::Done)
            .await
            .unwrap()
    );
    assert_eq!(pending(&h).await, 1);
    assert!(
        h.queue
            .settle_notification(&second, "r2", &Settled::Done)
            .await
            .unwrap()
    );
    assert_eq!(pending(&h).await, 0);
    assert!(claim(&h, "r1").await.is_empty());
}

pub async fn a_claim_whose_holder_went_silent_is_taken_over_when_its_lease_ends(h: Harness) {
    listening(&h).await;
    let job = h.create(Spec::default()).await;
    h.queue
        .request_cancel(&job.id, Some("alice"), None)
        .await
        .unwrap();
    let lost = claim(&h, "r1").await.remove(0);
    h.advance(LEASE - Duration::from_secs(1));
    assert!(claim(&h, "r2").await.is_empty());
    h.advance(Duration::from_secs(1));
    let taken = claim(&h, "r2").await.remove(0);
    assert_eq!((taken.id, taken.attempt), (lost.id, 2));
    assert!(
        !h.queue
            .settle_notification(&lost, "r1", &Settled::Done)
            .await
            .unwrap()
    );
    assert!(
        h.queue
            .settle_notification(&taken, "r2", &Settled::Done)
            .await
            .unwrap()
    );
}

pub async fn with_no_replica_listening_an_end_writes_no_notification(h: Harness) {
    let quiet = h.create(Spec::default()).await;
    h.queue
        .request_cancel(&quiet.id, Some("alice"), None)
        .await
        .unwrap();
    assert_eq!(pending(&h).await, 0);
    // Listening, then silent for longer than ten minutes (stopped, or dead): as good as gone.
    listening(&h).await;
    h.advance(Duration::from_secs(601));
    let late = h.create(Spec::default()).await;
    h.queue.request_cancel(&late.id, None, None).await.unwrap();
    assert_eq!(pending(&h).await, 0);
    // Said again: heard again.
    listening(&h).await;
    let heard = h.create(Spec::default()).await;
    h.queue.request_cancel(&heard.id, None, None).await.unwrap();
    assert_eq!(pending(&h).await, 1);
}

pub async fn every_way_a_job_ends_is_told_with_the_state_it_ended_in(h: Harness) {
    listening(&h).await;
    let succeeded = h.create(Spec::default()).await;
    let running = h.claim_exactly("w1", &succeeded).await;
    h.queue
        .complete(&succeeded.id, &fence(&running), None)
        .await
        .unwrap();
    let dead = h.create(Spec::attempts(1)).await;
    let running = h.claim_exactly("w1", &dead).await;
    h.queue
        .fail(&dead.id, &fence(&running), "again".into(), true)
        .await
        .unwrap();
    let rejected = h.create(Spec::default()).await;
    let running = h.claim_exactly("w1", &rejected).await;
    h.queue
        .request_approval(&rejected.id, &fence(&running))
        .await
        .unwrap();
    h.queue
        .reject(&rejected.id, Some("bob"), None)
        .await
        .unwrap();
    let told: Vec<(contract::JobId, String, JobState)> = claim(&h, "r1")
        .await
        .into_iter()
        .map(|n| (n.job_id, n.event, n.status))
        .collect();
    let ended = |id, state| (id, "job.ended".to_string(), state);
    assert_eq!(
        told,
        [
            ended(succeeded.id, JobState::Succeeded),
            ended(dead.id, JobState::DeadLetter),
            (
                rejected.id,
                "job.awaiting_approval".to_string(),
                JobState::AwaitingApproval
            ),
            ended(rejected.id, JobState::Failed),
        ]
    );
}

/// A success is written by different statements: one completion, a batch of them, a batch
/// from a replica that did not claim them (which takes the row lock), a completion with the
/// next claim. Each is told once, under its `job.completed`.
pub async fn every_way_a_success_is_written_tells_it_once_with_its_event(h: Harness) {
    listening(&h).await;
    for _ in 0..7 {
        h.create(Spec::default()).await;
    }
    let done = |job: &contract::Job| Completion {
        id: job.id,
        fence: fence(job),
        summary: None,
    };
    let alone = h.claim("w1").await.unwrap();
    h.queue
        .complete(&alone.id, &fence(&alone), None)
        .await
        .unwrap();
    let batch = h.queue.claim_many(&request("w1"), 2).await.unwrap();
    let written = h
        .queue
        .complete_many(batch.iter().map(done).collect())
        .await
        .unwrap();
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    let elsewhere = h.queue.claim_many(&request("w1"), 2).await.unwrap();
    let other = h.queue_with(|_| {}).await;
    let written = other
        .complete_many(elsewhere.iter().map(done).collect())
        .await
        .unwrap();
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    let finished = h.claim("w1").await.unwrap();
    let (_, next) = h
        .queue
        .complete_and_claim(&finished.id, &fence(&finished), None, &request("w1"), 1)
        .await
        .unwrap();
    assert_eq!(next.len(), 1, "the last job is claimed");

    let mut succeeded = vec![alone, finished];
    succeeded.extend(batch);
    succeeded.extend(elsewhere);
    let mut expected = Vec::new();
    for job in &succeeded {
        let completed = event_id(&h, job, events::JOB_COMPLETED).await;
        expected.push((job.id, completed, JobState::Succeeded));
    }
    let mut told: Vec<_> = claim(&h, "r1")
        .await
        .into_iter()
        .map(|n| (n.job_id, n.event_id, n.status))
        .collect();
    expected.sort_by_key(|&(_, event, _)| event);
    told.sort_by_key(|&(_, event, _)| event);
    assert_eq!(told, expected);
}
