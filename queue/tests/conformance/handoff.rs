//! A job created while a claimer waits on this replica is handed to it in the write that
//! creates it: stored already leased, with both its events, and delivered to that claimer.

use std::time::Duration;

use contract::JobState;
use contract::job::events;
use queue::{ClaimRequest, NotificationKind, Queue};

use crate::harness::*;

/// A claimer long-polling for `wait`, as a worker's HTTP claim does.
fn waiting(
    queue: &Queue,
    request: ClaimRequest,
    wait: Duration,
) -> tokio::task::JoinHandle<Option<contract::Job>> {
    let queue = queue.clone();
    tokio::spawn(async move { queue.claim_wait(&request, wait).await.unwrap() })
}

/// Long enough for a waiting claimer's first (empty) claim to end and for it to park.
const SETTLE: Duration = Duration::from_millis(300);

pub async fn a_job_created_while_a_claimer_waits_is_handed_to_it_in_one_write(h: Harness) {
    let claimer = waiting(&h.queue, request("w1"), Duration::from_secs(30));
    tokio::time::sleep(SETTLE).await;
    let mut heard = h.queue.subscribe();
    let job = h.create(Spec::default()).await;
    assert_eq!(job.status, JobState::Running, "stored already claimed");
    assert_eq!(job.claimed_by.as_deref(), Some("w1"));
    assert_eq!(job.attempt, 1);
    assert_eq!(job.started_at, Some(start_time()));
    assert_eq!(job.lease_expires_at, Some(start_time() + LEASE));
    let got = tokio::time::timeout(Duration::from_secs(5), claimer)
        .await
        .expect("the claimer got the job")
        .unwrap()
        .expect("a job");
    assert_eq!(got, job);
    assert_eq!(
        h.get(&job).await,
        job,
        "what was stored is what was handed over"
    );
    assert_eq!(
        h.event_kinds(&job).await,
        [events::JOB_CREATED, events::JOB_CLAIMED]
    );
    let claimed = &h.queue.list_events(&job.id, 0, 10).await.unwrap()[1];
    assert_eq!(claimed.message, "claimed by w1 (attempt 1 of 3)");
    assert_eq!(claimed.payload["workerId"], "w1");
    // Nobody is told the job is available: it never was.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut kinds = Vec::new();
    while let Ok(note) = heard.try_recv() {
        kinds.push(note.kind);
    }
    assert!(
        !kinds.contains(&NotificationKind::JobAvailable),
        "{kinds:?}"
    );
    assert!(kinds.contains(&NotificationKind::JobChanged), "{kinds:?}");
    // The lease is a lease like any other.
    let done = h.queue.complete(&job.id, &fence(&got), None).await.unwrap();
    assert_eq!(done.status, JobState::Succeeded);
}

pub async fn a_waiting_claimer_is_not_handed_a_job_it_may_not_run(h: Harness) {
    let mut no_codex = request("no-codex");
    no_codex.capabilities.retain(|c| c != "codex");
    let mut other_type = request("other-type");
    other_type.allowed_types = Some(vec!["cron".into()]);
    let mut other_repo = request("other-repo");
    other_repo.allowed_repositories = Some(vec!["octo/elsewhere".into()]);
    let claimers: Vec<_> = [no_codex, other_type, other_repo]
        .into_iter()
        .map(|r| waiting(&h.queue, r, Duration::from_millis(1500)))
        .collect();
    tokio::time::sleep(SETTLE).await;
    let job = h.create(Spec::default()).await;
    assert_eq!(job.status, JobState::Queued);
    for claimer in claimers {
        assert_eq!(claimer.await.unwrap(), None);
    }
    h.claim_exactly("able", &job).await;
}

pub async fn a_claimer_that_left_is_not_handed_a_job(h: Harness) {
    let claimer = waiting(&h.queue, request("gone"), Duration::from_secs(30));
    tokio::time::sleep(SETTLE).await;
    claimer.abort();
    let _ = claimer.await;
    let job = h.create(Spec::default()).await;
    assert_eq!(job.status, JobState::Queued);
    let claimed = h.claim_exactly("w2", &job).await;
    assert_eq!(claimed.attempt, 1);
}

pub async fn jobs_created_together_go_one_to_each_waiting_claimer(h: Harness) {
    let first = waiting(&h.queue, request("w1"), Duration::from_secs(30));
    let second = waiting(&h.queue, request("w2"), Duration::from_secs(30));
    tokio::time::sleep(SETTLE).await;
    let (a, b) = tokio::join!(h.create(Spec::default()), h.create(Spec::default()));
    let mut owners = vec![a.claimed_by.clone().unwrap(), b.claimed_by.clone().unwrap()];
    owners.sort();
    assert_eq!(owners, ["w1", "w2"]);
    let got_first = first.await.unwrap().unwrap();
    let got_second = second.await.unwrap().unwrap();
    assert_eq!(got_first.claimed_by.as_deref(), Some("w1"));
    assert_eq!(got_second.claimed_by.as_deref(), Some("w2"));
    assert_ne!(got_first.id, got_second.id);
    let mut ids = vec![got_first.id, got_second.id];
    ids.sort();
    let mut created = vec![a.id, b.id];
    created.sort();
    assert_eq!(ids, created);
}
