//! Notifications: what wakes long-polling workers and feeds the SSE streams.

use std::time::Duration;

use contract::JobState;
use queue::{Notification, NotificationKind, Queue};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::harness::*;

/// Everything received within `window`.
async fn drain(rx: &mut broadcast::Receiver<Notification>, window: Duration) -> Vec<Notification> {
    let mut got = Vec::new();
    let deadline = Instant::now() + window;
    while let Ok(Ok(note)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        got.push(note);
    }
    got
}

/// A queue whose claim_wait never polls by itself within a test, so only a notification
/// can wake it.
async fn deaf_poller(h: &Harness) -> Queue {
    h.queue_with(|c| c.claim_poll_interval = Duration::from_secs(60))
        .await
}

pub async fn created_job_wakes_a_waiting_claim_at_once(h: Harness) {
    let queue = deaf_poller(&h).await;
    let waiter = queue.clone();
    let waiting = tokio::spawn(async move {
        waiter
            .claim_wait(&request("w1"), Duration::from_secs(30))
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let created_at = Instant::now();
    let job = queue
        .create_job(&Spec::default().json(), None)
        .await
        .unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("claim_wait woke up")
        .unwrap()
        .unwrap()
        .expect("the new job");
    let latency = created_at.elapsed();
    assert_eq!(claimed.id, job.id);
    assert_eq!(claimed.status, JobState::Running);
    // Typically a few milliseconds; the bound only has to sit far below the 60 s poll.
    assert!(latency < Duration::from_secs(2), "woke after {latency:?}");
}

pub async fn claim_wait_gives_up_at_the_deadline(h: Harness) {
    let started = Instant::now();
    let got = h
        .queue
        .claim_wait(&request("w1"), Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(got, None);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
}

pub async fn claim_wait_notices_an_elapsed_retry_window(h: Harness) {
    let queue = h
        .queue_with(|c| c.claim_poll_interval = Duration::from_millis(50))
        .await;
    let job = queue
        .create_job(&Spec::default().json(), None)
        .await
        .unwrap();
    let claimed = queue.claim(&request("w1")).await.unwrap().unwrap();
    queue
        .fail(&job.id, &fence(&claimed), "flaky".into(), true)
        .await
        .unwrap();
    let waiter = queue.clone();
    let waiting = tokio::spawn(async move {
        waiter
            .claim_wait(&request("w2"), Duration::from_secs(30))
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "claimed before the retry window elapsed"
    );
    h.advance(Duration::from_secs(2));
    let again = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("claim_wait noticed the elapsed window")
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(again.id, job.id);
    assert_eq!(again.attempt, 2);
}

pub async fn every_change_is_broadcast_once_to_subscribers(h: Harness) {
    let mut rx = h.queue.subscribe();
    let job = h.create(Spec::default()).await;
    let created = drain(&mut rx, Duration::from_millis(300)).await;
    let event_id = h.queue.list_events(&job.id, 0, 10).await.unwrap()[0].id;
    assert_eq!(
        created,
        [
            Notification {
                job_id: job.id,
                kind: NotificationKind::EventAppended { event_id }
            },
            Notification {
                job_id: job.id,
                kind: NotificationKind::JobChanged
            },
            Notification {
                job_id: job.id,
                kind: NotificationKind::JobAvailable
            },
        ]
    );
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .heartbeat(&job.id, &fence(&claimed), LEASE)
        .await
        .unwrap();
    let kinds: Vec<NotificationKind> = drain(&mut rx, Duration::from_millis(300))
        .await
        .into_iter()
        .map(|n| n.kind)
        .collect();
    // The claim's event and row change; the heartbeat tells nobody.
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(matches!(kinds[0], NotificationKind::EventAppended { .. }));
    assert_eq!(kinds[1], NotificationKind::JobChanged);
}

/// A step starting or ending tells a jobs list its progress moved; a log line does not,
/// so a chatty agent does not redraw every list that shows the job.
pub async fn step_progress_is_announced_but_log_lines_are_not(h: Harness) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let mut rx = h.queue.subscribe();
    let f = fence(&claimed);
    for kind in [
        contract::job::task::STEP_STARTED,
        contract::job::task::STEP_LOG,
        contract::job::task::WARNING,
        contract::job::task::STEP_FINISHED,
    ] {
        h.queue
            .append_event(&job.id, &f, step_event(kind))
            .await
            .unwrap();
    }
    let heard = drain(&mut rx, Duration::from_millis(300)).await;
    let progress = heard
        .iter()
        .filter(|n| n.kind == NotificationKind::StepProgress)
        .count();
    assert_eq!(progress, 2, "{heard:?}");
    assert!(heard.iter().all(|n| n.job_id == job.id));
    let appended = heard
        .iter()
        .filter(|n| matches!(n.kind, NotificationKind::EventAppended { .. }))
        .count();
    assert_eq!(appended, 4, "{heard:?}");
}

/// Another replica (a second queue on the same database) hears this one's changes on
/// PostgreSQL, through LISTEN/NOTIFY. An embedded SQLite database has a single process, so
/// there a second queue hears nothing: notifications stay in-process.
pub async fn second_replica_hears_changes_through_the_database(h: Harness) {
    let replica = h
        .queue_with(|c| c.claim_poll_interval = Duration::from_secs(60))
        .await;
    let mut rx = replica.subscribe();
    let job = h.create(Spec::default()).await;
    let heard = drain(&mut rx, Duration::from_millis(500)).await;
    match h.backend {
        Backend::Postgres => {
            assert!(heard.len() >= 3, "{heard:?}");
            assert!(heard.iter().all(|n| n.job_id == job.id));
            assert!(
                heard
                    .iter()
                    .any(|n| n.kind == NotificationKind::JobAvailable)
            );
            // A waiting worker on the replica is woken by a job created here.
            h.claim_exactly("w0", &job).await;
            let waiter = replica.clone();
            let waiting = tokio::spawn(async move {
                waiter
                    .claim_wait(&request("w1"), Duration::from_secs(30))
                    .await
            });
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(!waiting.is_finished(), "nothing was claimable yet");
            let created_at = Instant::now();
            let second = h.create(Spec::default()).await;
            let claimed = tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .expect("the replica's claim_wait woke up")
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(claimed.id, second.id);
            assert!(created_at.elapsed() < Duration::from_secs(2));
        }
        Backend::Sqlite => assert_eq!(heard, []),
    }
}

/// On PostgreSQL a replica also receives its own NOTIFYs; it must not broadcast them twice.
pub async fn own_notifications_are_not_repeated(h: Harness) {
    let mut rx = h.queue.subscribe();
    let job = h.create(Spec::default()).await;
    let heard = drain(&mut rx, Duration::from_millis(500)).await;
    let available = heard
        .iter()
        .filter(|n| n.job_id == job.id && n.kind == NotificationKind::JobAvailable)
        .count();
    assert_eq!(available, 1, "{heard:?}");
    assert_eq!(heard.len(), 3, "{heard:?}");
}

/// Idle claimers are woken one per job; the first in line cannot run this one (it lacks
/// `docker`), so it must hand the wake-up on rather than let the job wait for a poll.
pub async fn a_job_reaches_the_idle_worker_that_can_run_it(h: Harness) {
    let queue = deaf_poller(&h).await;
    let mut without_docker = request("plain");
    without_docker.capabilities.retain(|c| c != "docker");
    let spawn_wait = |request: queue::ClaimRequest| {
        let queue = queue.clone();
        tokio::spawn(async move { queue.claim_wait(&request, Duration::from_secs(30)).await })
    };
    let plain = spawn_wait(without_docker.clone());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let able = spawn_wait(request("able"));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let spec = Spec {
        extra_caps: vec!["docker".into()],
        ..Spec::default()
    };
    let job = queue.create_job(&spec.json(), None).await.unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(5), able)
        .await
        .expect("the able worker was woken")
        .unwrap()
        .unwrap()
        .expect("the new job");
    assert_eq!(claimed.id, job.id);
    assert_eq!(claimed.claimed_by.as_deref(), Some("able"));

    // The plain worker is still in line, and the next job it can run reaches it.
    assert!(!plain.is_finished());
    let next = queue
        .create_job(&Spec::default().json(), None)
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), plain)
        .await
        .expect("the plain worker was woken")
        .unwrap()
        .unwrap()
        .expect("the second job");
    assert_eq!(got.id, next.id);
}
