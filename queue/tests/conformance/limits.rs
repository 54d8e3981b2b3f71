//! The limit of running jobs per repository: a claim skips the jobs of a repository that
//! has its limit running already, on any worker, and takes the next repository's.

use std::collections::HashMap;
use std::time::Duration;

use contract::{Job, JobState};
use queue::{ClaimRequest, Queue};

use crate::harness::*;

fn in_repo(repository: &str) -> Spec {
    Spec {
        repository: repository.into(),
        ..Spec::default()
    }
}

/// A replica of the harness's queue that lets `limit` jobs of a repository run at once.
async fn limited(h: &Harness, limit: u32) -> Queue {
    h.queue_with(|config| config.max_running_per_repository = Some(limit))
        .await
}

fn ids(jobs: &[Job]) -> Vec<contract::JobId> {
    jobs.iter().map(|j| j.id).collect()
}

pub async fn a_repository_at_its_limit_waits_while_other_repositories_go_first(h: Harness) {
    let queue = limited(&h, 1).await;
    let a1 = h.create(in_repo("octo/a")).await;
    let a2 = h.create(in_repo("octo/a")).await;
    let b1 = h.create(in_repo("octo/b")).await;
    let first = queue.claim(&request("w1")).await.unwrap().unwrap();
    assert_eq!(first.id, a1.id);
    // a2 is older than b1, but octo/a has its one job running.
    let second = queue.claim(&request("w2")).await.unwrap().unwrap();
    assert_eq!(second.id, b1.id);
    assert_eq!(queue.claim(&request("w3")).await.unwrap(), None);
    assert_eq!(h.get(&a2).await.status, JobState::Queued);
    // A job that ends frees its repository: a success, as here, or any other end.
    queue.complete(&a1.id, &fence(&first), None).await.unwrap();
    let third = queue.claim(&request("w3")).await.unwrap().unwrap();
    assert_eq!(third.id, a2.id);
    // The queue with no limit (the library's default) takes what it is asked.
    let a3 = h.create(in_repo("octo/a")).await;
    h.claim_exactly("w4", &a3).await;
}

pub async fn one_repository_written_several_ways_is_one_for_the_limit_and_for_a_token(h: Harness) {
    let queue = limited(&h, 1).await;
    let a1 = h.create(in_repo("octo/a")).await;
    let a2 = h.create(in_repo("https://github.com/Octo/A.git")).await;
    let a3 = h.create(in_repo("git@github.com:octo/a")).await;
    let first = queue.claim(&request("w1")).await.unwrap().unwrap();
    assert_eq!(first.id, a1.id);
    // The URL and the scp address are octo/a too, which has its one job running.
    assert_eq!(queue.claim(&request("w2")).await.unwrap(), None);
    queue.complete(&a1.id, &fence(&first), None).await.unwrap();
    // A token scoped to the slug takes a job submitted as its URL, and its own is
    // what the job says.
    let scoped = ClaimRequest {
        allowed_repositories: Some(vec!["octo/a".into()]),
        ..request("scoped")
    };
    let second = queue.claim(&scoped).await.unwrap().unwrap();
    assert_eq!(second.id, a2.id);
    assert_eq!(
        second.payload["repository"],
        "https://github.com/Octo/A.git"
    );
    let other = ClaimRequest {
        allowed_repositories: Some(vec!["octo/b".into()]),
        ..request("other")
    };
    queue.complete(&a2.id, &fence(&second), None).await.unwrap();
    assert_eq!(queue.claim(&other).await.unwrap(), None);
    assert_eq!(queue.claim(&scoped).await.unwrap().unwrap().id, a3.id);
}

pub async fn a_batch_never_takes_more_of_a_repository_than_its_limit_allows(h: Harness) {
    let mut made = HashMap::new();
    for repository in ["octo/a", "octo/a", "octo/a", "octo/b", "octo/b", "octo/c"] {
        let job = h.create(in_repo(repository)).await;
        made.entry(repository).or_insert_with(Vec::new).push(job.id);
    }
    let one = limited(&h, 1).await;
    let batch = one.claim_many(&request("w1"), 10).await.unwrap();
    assert_eq!(
        ids(&batch),
        [made["octo/a"][0], made["octo/b"][0], made["octo/c"][0]],
        "one of each repository, in claim order"
    );
    // With room for two, the same claim takes each repository's second; the third job of
    // octo/a waits, and the batch comes back short rather than breaking the limit.
    let two = limited(&h, 2).await;
    let batch = two.claim_many(&request("w2"), 10).await.unwrap();
    assert_eq!(ids(&batch), [made["octo/a"][1], made["octo/b"][1]]);
    assert_eq!(two.claim(&request("w3")).await.unwrap(), None);
}

pub async fn a_worker_s_own_limit_tightens_the_queue_s_and_zero_is_refused(h: Harness) {
    let a1 = h.create(in_repo("octo/a")).await;
    let a2 = h.create(in_repo("octo/a")).await;
    let a3 = h.create(in_repo("octo/a")).await;
    let strict = ClaimRequest {
        max_running_per_repository: Some(1),
        ..request("strict")
    };
    // The queue sets no limit; the worker's applies to its own claims.
    assert_eq!(h.queue.claim(&strict).await.unwrap().unwrap().id, a1.id);
    assert_eq!(h.queue.claim(&strict).await.unwrap(), None);
    // Another worker without a limit is not held back by it.
    h.claim_exactly("free", &a2).await;
    // A worker cannot loosen the queue's limit: the lower one holds.
    let queue = limited(&h, 2).await;
    let loose = ClaimRequest {
        max_running_per_repository: Some(5),
        ..request("loose")
    };
    assert_eq!(queue.claim(&loose).await.unwrap(), None, "octo/a runs two");
    assert_eq!(h.get(&a3).await.status, JobState::Queued);
    let zero = ClaimRequest {
        max_running_per_repository: Some(0),
        ..request("zero")
    };
    let refused = assert_code(h.queue.claim(&zero).await, "invalid_queue_payload");
    assert!(
        refused.to_string().contains("maxRunningPerRepository"),
        "{refused}"
    );
}

/// Many claimers at once, in batches, on two replicas: never more than the limit of one
/// repository running, whichever claim saw the count first.
pub async fn concurrent_claimers_never_run_more_of_a_repository_than_its_limit(h: Harness) {
    const REPOSITORIES: usize = 4;
    const ROUNDS: usize = 5;
    for i in 0..REPOSITORIES * ROUNDS * 2 {
        h.create(in_repo(&format!("octo/r{}", i % REPOSITORIES)))
            .await;
    }
    let replicas = [limited(&h, 1).await, limited(&h, 1).await];
    for round in 0..ROUNDS {
        let mut claimers = Vec::new();
        for w in 0..8 {
            let queue = replicas[w % 2].clone();
            claimers.push(tokio::spawn(async move {
                let worker = format!("r{round}w{w}");
                queue.claim_many(&request(&worker), 3).await.unwrap()
            }));
        }
        let mut claimed = Vec::new();
        for claimer in claimers {
            claimed.extend(claimer.await.unwrap());
        }
        let running = h
            .queue
            .list_jobs(&queue::JobFilter {
                status: Some(JobState::Running),
                limit: Some(200),
                ..Default::default()
            })
            .await
            .unwrap()
            .jobs;
        let mut per_repository: HashMap<String, usize> = HashMap::new();
        for job in &running {
            *per_repository
                .entry(job.payload["repository"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        assert!(
            per_repository.values().all(|&n| n == 1),
            "round {round}: {per_repository:?}"
        );
        assert_eq!(
            claimed.len(),
            REPOSITORIES,
            "round {round}: one per repository"
        );
        for job in claimed {
            h.queue.complete(&job.id, &fence(&job), None).await.unwrap();
        }
    }
}

/// A claimer waiting under a limit is not handed a new job in the write that creates it
/// (that write cannot count the repository's running jobs): it is woken and claims, and
/// the limit holds.
pub async fn a_waiting_claimer_under_a_limit_is_woken_to_claim_a_job_it_may_run(h: Harness) {
    let queue = limited(&h, 1).await;
    h.create(in_repo("octo/a")).await;
    let running = queue.claim(&request("w1")).await.unwrap().unwrap();
    let waiter = {
        let queue = queue.clone();
        tokio::spawn(async move {
            queue
                .claim_wait(&request("w2"), Duration::from_secs(20))
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let blocked = queue
        .create_job(&in_repo("octo/a").json(), None)
        .await
        .unwrap();
    assert_eq!(blocked.status, JobState::Queued, "not handed over");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "octo/a runs its one job");
    let free = queue
        .create_job(&in_repo("octo/b").json(), None)
        .await
        .unwrap();
    assert_eq!(
        free.status,
        JobState::Queued,
        "created queued, then claimed"
    );
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the claimer was woken")
        .unwrap()
        .expect("a job");
    assert_eq!(got.id, free.id);
    assert_eq!(h.get(&blocked).await.status, JobState::Queued);
    assert_eq!(h.get(&running).await.status, JobState::Running);
}
