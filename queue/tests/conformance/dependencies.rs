//! Jobs that wait for others: unknown or already failed dependencies are refused by their
//! place; a waiting job is queued but never claimed until every job it waits for has
//! succeeded; one that fails, is cancelled or dead-letters cancels the jobs waiting for
//! it (and theirs in turn), naming it; the edges read both ways.

use contract::{Job, JobId, JobState};
use serde_json::{Value, json};

use crate::harness::*;

fn spec(name: &str, depends_on: &[&Job]) -> Value {
    let ids: Vec<String> = depends_on.iter().map(|j| j.id.to_string()).collect();
    json!({ "type": "task", "dependsOn": ids, "payload": { "repository": "octo/repo",
        "task": { "instructions": name } } })
}

async fn made(h: &Harness, name: &str, depends_on: &[&Job]) -> Job {
    h.queue
        .create_job(&spec(name, depends_on), Some("alice"))
        .await
        .unwrap()
}

async fn finish(h: &Harness, job: &Job, succeed: bool) {
    let claimed = h.claim_exactly("w1", job).await;
    if succeed {
        h.queue
            .complete(&job.id, &fence(&claimed), None)
            .await
            .unwrap();
    } else {
        h.queue
            .fail(&job.id, &fence(&claimed), "broke".into(), false)
            .await
            .unwrap();
    }
}

async fn resolve(h: &Harness) -> usize {
    h.queue.resolve_dependencies().await.unwrap()
}

pub async fn unknown_or_failed_dependencies_are_refused_by_their_place(h: Harness) {
    let unknown: JobId = "0190a000-0000-7000-8000-000000000009".parse().unwrap();
    let failed = made(&h, "a", &[]).await;
    finish(&h, &failed, false).await;
    let raw = json!({ "dependsOn": [unknown.to_string(), failed.id.to_string(), "x"],
        "payload": { "repository": "octo/repo", "task": { "instructions": "b" } } });
    let error = h.queue.create_job(&raw, None).await.unwrap_err();
    let queue::QueueError::Invalid(errors) = error else {
        panic!("{error}")
    };
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["dependsOn[2]"],
        "the ids that are not ids first: {errors:?}"
    );
    let raw = json!({ "dependsOn": [unknown.to_string(), failed.id.to_string()],
        "payload": { "repository": "octo/repo", "task": { "instructions": "b" } } });
    let queue::QueueError::Invalid(errors) = h.queue.create_job(&raw, None).await.unwrap_err()
    else {
        panic!()
    };
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["dependsOn[0]", "dependsOn[1]"], "{errors:?}");
    assert!(errors[1].message.contains("failed"), "{errors:?}");
    let mut both = spec("c", &[]);
    both["dependsOn"] = json!([failed.id.to_string()]);
    both["notBefore"] = json!("2030-01-01T00:00:00Z");
    let error = h.queue.create_job(&both, None).await.unwrap_err();
    assert!(error.to_string().contains("notBefore"), "{error}");
    assert_eq!(h.count("SELECT count(*) FROM jobs").await, 1);
}

pub async fn a_waiting_job_is_claimed_only_once_every_dependency_succeeded(h: Harness) {
    let a = made(&h, "a", &[]).await;
    let b = made(&h, "b", &[]).await;
    let c = made(&h, "c", &[&a, &b]).await;
    assert_eq!(
        (c.status, c.waiting_for.clone()),
        (JobState::Queued, vec![a.id, b.id])
    );
    assert_eq!(h.get(&c).await.waiting_for, vec![a.id, b.id]);
    let created = h.queue.list_events(&c.id, 0, 10).await.unwrap();
    assert_eq!(created[0].message, "queued, waiting for 2 jobs");
    assert_eq!(created[0].payload["waitingFor"], json!([a.id, b.id]));
    // Paused and resumed it would start at once: a waiting job is not paused.
    let paused = h
        .queue
        .request_pause(&c.id, Some("alice"), false)
        .await
        .unwrap_err();
    assert!(
        paused.to_string().contains("waits for other jobs"),
        "{paused}"
    );
    // Claims take a and b, never c.
    let first = h.claim("w1").await.unwrap();
    let second = h.claim("w1").await.unwrap();
    assert!(h.claim("w1").await.is_none(), "c waits");
    h.queue
        .complete(&first.id, &fence(&first), None)
        .await
        .unwrap();
    assert_eq!(resolve(&h).await, 0, "one of two succeeded");
    assert_eq!(h.get(&c).await.waiting_for, vec![second.id]);
    assert!(h.claim("w1").await.is_none());
    h.queue
        .complete(&second.id, &fence(&second), None)
        .await
        .unwrap();
    assert_eq!(resolve(&h).await, 1);
    assert_eq!(resolve(&h).await, 0, "released once");
    let released = h.get(&c).await;
    assert!(released.waiting_for.is_empty());
    assert!(released.next_attempt_at <= h.queue.now());
    h.claim_exactly("w1", &c).await;
    // The edges, both ways.
    let edges = h.queue.job_edges(&c.id).await.unwrap();
    assert_eq!(
        edges.depends_on,
        [(a.id, "met".to_string()), (b.id, "met".to_string())]
    );
    assert_eq!(
        h.queue.job_edges(&a.id).await.unwrap().needed_by,
        [(c.id, "met".to_string())]
    );
    // Waiting for a job that already succeeded is no wait.
    let d = made(&h, "d", &[&a]).await;
    assert!(d.waiting_for.is_empty());
    h.claim_exactly("w1", &d).await;
}

pub async fn a_failed_dependency_cancels_its_waiting_jobs_naming_it(h: Harness) {
    let a = made(&h, "a", &[]).await;
    let c = made(&h, "c", &[&a]).await;
    let d = made(&h, "d", &[&c]).await;
    let other = made(&h, "other", &[]).await;
    let e = made(&h, "e", &[&other]).await;
    finish(&h, &a, false).await;
    assert_eq!(resolve(&h).await, 1);
    let c = h.get(&c).await;
    assert_eq!(c.status, JobState::Cancelled);
    let reason = c.cancel_reason.unwrap_or_default();
    assert!(
        reason.contains(&a.id.to_string()) && reason.contains("failed"),
        "{reason}"
    );
    // And the jobs that waited for it, in turn.
    assert_eq!(resolve(&h).await, 1);
    let d = h.get(&d).await;
    assert_eq!(d.status, JobState::Cancelled);
    assert!(
        d.cancel_reason
            .unwrap_or_default()
            .contains(&c.id.to_string())
    );
    // A dependency cancelled by an operator does the same.
    h.queue
        .request_cancel(&other.id, Some("alice"), None)
        .await
        .unwrap();
    assert_eq!(resolve(&h).await, 1);
    let e = h.get(&e).await;
    assert_eq!(e.status, JobState::Cancelled);
    assert!(e.cancel_reason.unwrap_or_default().contains("cancelled"));
}
