//! The workers the server has seen through claims and heartbeats.

use std::time::Duration;

use queue::{Sighting, missing_capabilities};

use crate::harness::*;

fn caps(list: &[&str]) -> Vec<String> {
    list.iter().map(|c| c.to_string()).collect()
}

/// A claim's sighting that says only what it offers.
fn offers(capabilities: &[String]) -> Sighting<'_> {
    Sighting {
        capabilities: Some(capabilities),
        ..Sighting::default()
    }
}

pub async fn a_worker_is_remembered_with_what_it_can_run_and_what_it_holds(h: Harness) {
    assert!(h.queue.list_workers().await.unwrap().is_empty());
    let can = caps(&ALL_CAPS);
    let git = caps(&["git"]);
    h.queue
        .worker_seen(
            "w1",
            &Sighting {
                capabilities: Some(&can),
                version: Some("stepwise-worker 0.1.0"),
                sandbox: Some("bwrap"),
            },
        )
        .await
        .unwrap();
    let job = h.create(Spec::default()).await;
    h.claim_exactly("w1", &job).await;

    // A heartbeat soon after changes nothing worth a write.
    h.advance(Duration::from_secs(1));
    h.queue
        .worker_seen("w1", &Sighting::default())
        .await
        .unwrap();
    let listed = h.queue.list_workers().await.unwrap();
    assert_eq!(listed.len(), 1);
    let w1 = &listed[0];
    assert_eq!(w1.id, "w1");
    assert_eq!(w1.capabilities, can);
    assert_eq!(w1.version.as_deref(), Some("stepwise-worker 0.1.0"));
    assert_eq!(w1.sandbox.as_deref(), Some("bwrap"));
    assert_eq!(w1.first_seen_at, start_time());
    assert_eq!(w1.last_seen_at, start_time());
    assert_eq!(w1.running_jobs, std::slice::from_ref(&job.id));

    // Later, a heartbeat refreshes when it was seen and keeps what it said before.
    h.advance(Duration::from_secs(20));
    h.queue
        .worker_seen("w1", &Sighting::default())
        .await
        .unwrap();
    h.queue.worker_seen("w2", &offers(&git)).await.unwrap();
    let listed = h.queue.list_workers().await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["w1", "w2"]);
    let w1 = &listed[0];
    assert_eq!(w1.last_seen_at, start_time() + Duration::from_secs(21));
    assert_eq!(w1.capabilities, can);
    assert_eq!(w1.version.as_deref(), Some("stepwise-worker 0.1.0"));
    assert_eq!(
        w1.sandbox.as_deref(),
        Some("bwrap"),
        "a heartbeat keeps what a claim said"
    );
    assert!(listed[1].running_jobs.is_empty());
    assert_eq!(listed[1].sandbox, None);

    // Once w1 has been gone a while, a job that needs codex has nobody to run it.
    h.advance(Duration::from_secs(61));
    h.queue.worker_seen("w2", &offers(&git)).await.unwrap();
    let listed = h.queue.list_workers().await.unwrap();
    assert_eq!(
        missing_capabilities(&caps(&["codex", "git"]), &listed, h.queue.now()),
        Some(caps(&["codex"]))
    );
    assert_eq!(
        missing_capabilities(&caps(&["git"]), &listed, h.queue.now()),
        None
    );
}
