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
