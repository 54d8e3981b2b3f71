//! A completion and the worker's next claim in one call (`complete_and_claim`): each
//! reads as if made on its own, and a refused completion claims nothing.

use std::collections::HashSet;
use std::time::Duration;

use contract::JobState;
use queue::Fence;
use tokio::task::JoinSet;

use crate::golden::{golden, run_step, task_job};
use crate::harness::*;

pub async fn a_job_completed_with_its_next_claim_reads_as_one_completed_alone(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    for index in 0..3 {
        run_step(&h, &claimed, index).await;
    }
    h.advance(Duration::from_millis(250));
    let (done, next) = h
        .queue
        .complete_and_claim(
            &job.id,
            &fence(&claimed),
            Some("done".into()),
            &request("w1"),
            1,
        )
        .await
        .unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert!(next.is_empty(), "nothing else was queued: {next:?}");
    golden(&h, "succeeds", &[job.id]).await;
}

pub async fn the_next_jobs_are_leased_in_claim_order_once_the_completion_is_written(h: Harness) {
    let first = h.create(Spec::default()).await;
    h.advance(Duration::from_millis(5));
    let mut rest = Vec::new();
    for priority in [0, 5, 0] {
        rest.push(h.create(Spec::priority(priority)).await);
        h.advance(Duration::from_millis(5));
    }
    let held = h.claim_exactly("w1", &rest[1]).await;
    let (done, next) = h
        .queue
        .complete_and_claim(&held.id, &fence(&held), None, &request("w1"), 2)
        .await
        .unwrap();
    assert_eq!(done, h.get(&held).await);
    assert_eq!(done.status, JobState::Succeeded);
    assert_eq!(
        next.iter().map(|j| j.id).collect::<Vec<_>>(),
        [first.id, rest[0].id]
    );
    for job in &next {
        assert_eq!(job.status, JobState::Running);
        assert_eq!(job.claimed_by.as_deref(), Some("w1"));
        assert_eq!(job.attempt, 1);
        assert_eq!(h.get(job).await, *job);
        assert_eq!(h.event_kinds(job).await, ["job.created", "job.claimed"]);
    }
    assert_eq!(
        h.event_kinds(&held).await,
        ["job.created", "job.claimed", "job.completed"]
    );
    // The next finish completes one of those and takes the last job.
    let (_, last) = h
        .queue
        .complete_and_claim(&next[0].id, &fence(&next[0]), None, &request("w1"), 5)
        .await
        .unwrap();
    assert_eq!(last.iter().map(|j| j.id).collect::<Vec<_>>(), [rest[2].id]);
}

pub async fn a_refused_completion_or_claim_writes_nothing(h: Harness) {
    let job = h.create(Spec::default()).await;
    let other = h.create(Spec::default()).await;
    let held = h.claim_exactly("w1", &job).await;
    let stale = Fence::new("w1", 7);
    assert_code(
        h.queue
            .complete_and_claim(&job.id, &stale, None, &request("w1"), 1)
            .await,
        "job_ownership_mismatch",
    );
    let mut blind = request("w1");
    blind.worker_id = String::new();
    assert_code(
        h.queue
            .complete_and_claim(&job.id, &fence(&held), None, &blind, 1)
            .await,
        "invalid_queue_payload",
    );
    assert_code(
        h.queue
            .complete_and_claim(&job.id, &fence(&held), None, &request("w1"), 0)
            .await,
        "invalid_queue_payload",
    );
    assert_eq!(h.get(&job).await, held);
    assert_eq!(h.get(&other).await.status, JobState::Queued);
    assert_eq!(h.event_kinds(&job).await, ["job.created", "job.claimed"]);
}

pub async fn the_next_claim_keeps_to_the_worker_s_capabilities_and_repository_limit(h: Harness) {
    let queue = h
        .queue_with(|config| config.max_running_per_repository = Some(1))
        .await;
    let mine = h.create(Spec::default()).await;
    h.advance(Duration::from_millis(5));
    let beyond = h
        .create(Spec {
            extra_caps: vec!["docker".into()],
            ..Spec::default()
        })
        .await;
    h.advance(Duration::from_millis(5));
    let same_repository = h.create(Spec::default()).await;
    let held = queue.claim(&request("w1")).await.unwrap().unwrap();
    assert_eq!(held.id, mine.id);
    let mut narrow = request("w1");
    narrow.capabilities = vec!["codex".into(), "git".into()];
    // The completion frees the repository's one place before the claim counts it.
    let (_, next) = queue
        .complete_and_claim(&held.id, &fence(&held), None, &narrow, 5)
        .await
        .unwrap();
    assert_eq!(
        next.iter().map(|j| j.id).collect::<Vec<_>>(),
        [same_repository.id]
    );
    assert_eq!(h.get(&beyond).await.status, JobState::Queued);
}

pub async fn concurrent_finishes_complete_every_job_once_and_lease_none_twice(h: Harness) {
    const JOBS: usize = 40;
    let mut created = HashSet::new();
    for _ in 0..JOBS {
        created.insert(h.create(Spec::default()).await.id);
    }
    let mut loops = JoinSet::new();
    for w in 0..4 {
        let queue = h.queue.clone();
        loops.spawn(async move {
            let worker = format!("w{w}");
            let mut done = Vec::new();
            let mut held = queue.claim(&request(&worker)).await.unwrap();
            while let Some(job) = held {
                let (finished, next) = queue
                    .complete_and_claim(&job.id, &fence(&job), None, &request(&worker), 1)
                    .await
                    .unwrap();
                assert_eq!(finished.status, JobState::Succeeded);
                done.push(finished.id);
                held = next.into_iter().next();
            }
            done
        });
    }
    let mut completed = Vec::new();
    while let Some(done) = loops.join_next().await {
        completed.extend(done.unwrap());
    }
    assert_eq!(completed.len(), JOBS, "each job completed once");
    assert_eq!(completed.iter().copied().collect::<HashSet<_>>(), created);
    for id in created {
        let job = h.queue.get_job(&id).await.unwrap();
        assert_eq!(job.status, JobState::Succeeded);
        assert_eq!(job.attempt, 1, "leased once");
        assert_eq!(
            h.event_kinds(&job).await,
            ["job.created", "job.claimed", "job.completed"]
        );
    }
}
