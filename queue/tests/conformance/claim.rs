//! What a claim picks, and what it refuses to pick.

use std::time::Duration;

use contract::JobState;
use queue::ClaimRequest;

use crate::harness::*;

pub async fn claim_takes_higher_priority_first_then_oldest(h: Harness) {
    let mut created = Vec::new();
    for priority in [0, 5, 5, -1, 0] {
        created.push(h.create(Spec::priority(priority)).await);
        h.advance(Duration::from_secs(1));
    }
    let mut order = Vec::new();
    while let Some(job) = h.claim("w1").await {
        order.push(created.iter().position(|c| c.id == job.id).unwrap());
    }
    assert_eq!(order, [1, 2, 0, 4, 3]);
}

pub async fn jobs_created_in_the_same_millisecond_are_claimed_in_creation_order(h: Harness) {
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(h.create(Spec::default()).await.id);
    }
    let mut claimed = Vec::new();
    while let Some(job) = h.claim("w1").await {
        claimed.push(job.id);
    }
    assert_eq!(claimed, created);
}

pub async fn claim_requires_every_capability_of_the_job(h: Harness) {
    let docker = h
        .create(Spec {
            extra_caps: vec!["docker".into()],
            ..Spec::default()
        })
        .await;
    let without_docker = |worker: &str| ClaimRequest {
        capabilities: vec!["codex".into(), "git".into(), "gh".into()],
        ..request(worker)
    };
    assert_eq!(h.queue.claim(&without_docker("w1")).await.unwrap(), None);
    let nothing = ClaimRequest {
        capabilities: vec![],
        ..request("w1")
    };
    assert_eq!(h.queue.claim(&nothing).await.unwrap(), None);

    // The plain job needs only codex + git, a subset of the same worker's.
    let plain = h.create(Spec::default()).await;
    let claimed = h.queue.claim(&without_docker("w1")).await.unwrap().unwrap();
    assert_eq!(claimed.id, plain.id);
    assert_eq!(h.get(&docker).await.status, JobState::Queued);

    let claimed = h.claim("w2").await.unwrap();
    assert_eq!(claimed.id, docker.id);
}

pub async fn claim_respects_allowed_types_and_repositories(h: Harness) {
    let job = h
        .create(Spec {
            repository: "octo/a".into(),
            ..Spec::default()
        })
        .await;
    let only = |types: Option<&[&str]>, repos: Option<&[&str]>| ClaimRequest {
        allowed_types: types.map(|t| t.iter().map(|s| s.to_string()).collect()),
        allowed_repositories: repos.map(|r| r.iter().map(|s| s.to_string()).collect()),
        ..request("w1")
    };
    for refused in [
        only(Some(&["other"]), None),
        only(Some(&[]), None),
        only(None, Some(&["octo/b"])),
        only(None, Some(&[])),
        // Compared by the repository's key: no prefix of another name counts (GitHub's
        // names ignore case, so `octo/A` would allow it: see `limits.rs`).
        only(Some(&["task"]), Some(&["octo/ab"])),
    ] {
        assert_eq!(h.queue.claim(&refused).await.unwrap(), None, "{refused:?}");
    }
    let claimed = h
        .queue
        .claim(&only(Some(&["other", "task"]), Some(&["octo/b", "octo/a"])))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, job.id);
}

pub async fn claim_with_nothing_claimable_returns_none(h: Harness) {
    assert_eq!(h.claim("w1").await, None);
    let job = h.create(Spec::default()).await;
    h.claim_exactly("w1", &job).await;
    assert_eq!(h.claim("w2").await, None);
    assert_eq!(h.get(&job).await.claimed_by.as_deref(), Some("w1"));
}

pub async fn claim_refuses_a_blank_worker_or_an_empty_lease(h: Harness) {
    h.create(Spec::default()).await;
    let blank = ClaimRequest {
        worker_id: " ".into(),
        ..request("w1")
    };
    assert_code(h.queue.claim(&blank).await, "invalid_queue_payload");
    let no_lease = ClaimRequest {
        lease: Duration::ZERO,
        ..request("w1")
    };
    assert_code(h.queue.claim(&no_lease).await, "invalid_queue_payload");
    assert!(h.claim("w1").await.is_some());
}
