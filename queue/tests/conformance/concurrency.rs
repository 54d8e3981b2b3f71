//! Many workers at once.

use std::collections::HashMap;
use std::time::Duration;

use contract::{JobId, JobState};

use crate::harness::*;

const CLAIMERS: usize = 8;
const JOBS: usize = 200;

pub async fn concurrent_claimers_claim_every_job_exactly_once(h: Harness) {
    let mut created = Vec::new();
    for i in 0..JOBS {
        created.push(h.create(Spec::priority((i % 7) as i32)).await.id);
    }
    let mut tasks = Vec::new();
    for w in 0..CLAIMERS {
        let queue = h.queue.clone();
        tasks.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            let mut mine = Vec::new();
            while let Some(job) = queue.claim(&request(&worker)).await.unwrap() {
                assert_eq!(job.claimed_by.as_deref(), Some(worker.as_str()));
                assert_eq!(job.attempt, 1);
                queue.complete(&job.id, &fence(&job), None).await.unwrap();
                mine.push(job.id);
            }
            mine
        }));
    }
    let mut claims: HashMap<JobId, usize> = HashMap::new();
    let mut busy_workers = 0;
    for task in tasks {
        let mine = tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("claimers finish")
            .unwrap();
        busy_workers += usize::from(!mine.is_empty());
        for id in mine {
            *claims.entry(id).or_default() += 1;
        }
    }
    assert_eq!(claims.len(), JOBS);
    assert!(claims.values().all(|&n| n == 1), "a job was claimed twice");
    assert!(created.iter().all(|id| claims.contains_key(id)));
    assert!(busy_workers > 1, "only one claimer ever got a job");
    let page = h
        .queue
        .list_jobs(&queue::JobFilter {
            status: Some(JobState::Succeeded),
            limit: Some(200),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), JOBS);
    assert!(page.jobs.iter().all(|j| j.attempt == 1));
}

/// Heartbeats racing a cancel request on one job: every write must land on the state the
/// previous one left, so no heartbeat puts back a job without its cancel request.
pub async fn racing_heartbeats_never_undo_a_cancel_request(h: Harness) {
    for round in 0..5 {
        let job = h.create(Spec::default()).await;
        let claimed = h.claim_exactly("w1", &job).await;
        let mut tasks = Vec::new();
        for beat in 0..8_u64 {
            let queue = h.queue.clone();
            let (id, f) = (job.id, fence(&claimed));
            tasks.push(tokio::spawn(async move {
                let lease = Duration::from_secs(60 + beat);
                queue.heartbeat(&id, &f, lease).await.map(drop)
            }));
        }
        let queue = h.queue.clone();
        let id = job.id;
        tasks.push(tokio::spawn(async move {
            queue
                .request_cancel(&id, Some("alice"), Some(format!("round {round}")))
                .await
                .map(drop)
        }));
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let after = h.get(&job).await;
        assert_eq!(after.status, JobState::Running);
        assert!(
            after.cancel_requested_at.is_some(),
            "round {round}: {after:?}"
        );
        assert_eq!(after.cancel_reason, Some(format!("round {round}")));
        let kinds = h.event_kinds(&job).await;
        let requested = kinds
            .iter()
            .filter(|k| k.as_str() == queue::events::JOB_CANCEL_REQUESTED)
            .count();
        assert_eq!(requested, 1, "{kinds:?}");
    }
}

/// Claimers that ask for different things, all at once (on PostgreSQL they share
/// statements when they ask alike, see `store/postgres/committer.rs`): each gets only jobs
/// it can run, and every job goes to exactly one of them.
pub async fn claimers_asking_for_different_things_at_once_each_get_only_what_they_can_run(
    h: Harness,
) {
    let docker = Spec {
        extra_caps: vec!["docker".into()],
        ..Spec::default()
    };
    let mut wanted = HashMap::new();
    for i in 0..60 {
        let job = h
            .create(if i % 3 == 0 {
                docker.clone()
            } else {
                Spec::default()
            })
            .await;
        wanted.insert(job.id, i % 3 == 0);
    }
    let mut tasks = Vec::new();
    for w in 0..8 {
        let queue = h.queue.clone();
        tasks.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            let mut request = request(&worker);
            let has_docker = w % 2 == 0;
            if !has_docker {
                request.capabilities.retain(|c| c != "docker");
            }
            let mut mine = Vec::new();
            while let Some(job) = queue.claim(&request).await.unwrap() {
                assert_eq!(job.claimed_by.as_deref(), Some(worker.as_str()));
                mine.push(job.id);
                queue.complete(&job.id, &fence(&job), None).await.unwrap();
            }
            (has_docker, mine)
        }));
    }
    let mut claimed: HashMap<JobId, usize> = HashMap::new();
    for task in tasks {
        let (has_docker, mine) = tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("claimers finish")
            .unwrap();
        for id in mine {
            assert!(
                has_docker || !wanted[&id],
                "a job needing docker went to a worker without it"
            );
            *claimed.entry(id).or_default() += 1;
        }
    }
    assert_eq!(claimed.len(), wanted.len());
    assert!(claimed.values().all(|&n| n == 1), "a job was claimed twice");
}

/// Many completions at once, on PostgreSQL sharing statements: each caller gets its own
/// job back, each job ends with its own one `job.completed` event after its claim.
pub async fn completions_at_once_each_get_their_own_answer_and_event(h: Harness) {
    let mut claimed = Vec::new();
    for _ in 0..24 {
        let job = h.create(Spec::default()).await;
        claimed.push(h.claim_exactly("w1", &job).await);
    }
    let tasks: Vec<_> = claimed
        .iter()
        .map(|job| {
            let queue = h.queue.clone();
            let (id, f) = (job.id, fence(job));
            tokio::spawn(async move {
                queue
                    .complete(&id, &f, Some(format!("done {id}")))
                    .await
                    .map(|done| (id, done))
            })
        })
        .collect();
    for task in tasks {
        let (id, done) = task.await.unwrap().unwrap();
        assert_eq!(done.id, id);
        assert_eq!(done.status, JobState::Succeeded);
        assert_eq!(done.result_summary, Some(format!("done {id}")));
        let kinds = h.event_kinds(&done).await;
        assert_eq!(
            kinds.iter().filter(|k| *k == "job.completed").count(),
            1,
            "{kinds:?}"
        );
        assert_eq!(kinds.last().map(String::as_str), Some("job.completed"));
    }
}

/// Every write a running job takes, all at once on one job, round after round: heartbeats,
/// its steps' events (under the job's lock), a cancel request and its completion. On
/// PostgreSQL each write of a live job takes its live row before its own row
/// (`store/live.rs`), so none waits on another in a circle: every call ends with the job's
/// answer or a refusal of its state, never a database error (a deadlock), and
/// the job ends succeeded with its one `job.completed` last in its timeline.
pub async fn every_write_of_a_running_job_at_once_ends_without_a_deadlock(h: Harness) {
    for round in 0..20 {
        let job = h.create(Spec::default()).await;
        let claimed = h.claim_exactly("w1", &job).await;
        let mut tasks = Vec::new();
        for n in 0..12_u64 {
            let queue = h.queue.clone();
            let (id, f) = (job.id, fence(&claimed));
            tasks.push(tokio::spawn(async move {
                match n % 4 {
                    0 => queue
                        .heartbeat(&id, &f, Duration::from_secs(60 + n))
                        .await
                        .map(drop),
                    1 => queue
                        .append_event(&id, &f, step_event("task.step.started"))
                        .await
                        .map(drop),
                    2 => queue
                        .request_cancel(&id, Some("alice"), Some(format!("round {round}")))
                        .await
                        .map(drop),
                    _ => queue.complete(&id, &f, Some("done".into())).await.map(drop),
                }
            }));
        }
        for task in tasks {
            if let Err(refused) = task.await.unwrap() {
                assert!(
                    !matches!(refused, queue::QueueError::Database(_)),
                    "round {round}: {refused:?}"
                );
            }
        }
        assert_eq!(
            h.get(&job).await.status,
            JobState::Succeeded,
            "round {round}"
        );
        let kinds = h.event_kinds(&job).await;
        let completed = kinds.iter().filter(|k| *k == "job.completed").count();
        assert_eq!(completed, 1, "round {round}: {kinds:?}");
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("job.completed"),
            "round {round}: {kinds:?}"
        );
    }
}
