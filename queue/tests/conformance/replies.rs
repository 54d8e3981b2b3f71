//! Jobs from GitHub: one job per delivery, however often it comes and however many
//! queues take it at once; a client may not name a source; the reply on the issue is due
//! with the job, leased by one replica at a time, settled only under its own lease, and
//! due again when the job ends, even while a reply is being written; a mention's round is
//! made once.

use std::time::Duration;

use contract::JobState;
use contract::source::JobSource;
use queue::{Replied, Reply};
use serde_json::json;

use crate::harness::*;

const LEASE: Duration = Duration::from_secs(30);

fn source(delivery: &str) -> JobSource {
    JobSource::Github {
        issue: "https://github.com/octo/repo/issues/3".into(),
        delivery: delivery.into(),
        event: format!("comment:{delivery}"),
        comment: None,
    }
}

fn request() -> serde_json::Value {
    json!({ "payload": { "repository": "octo/repo", "task": {
        "instructions": "Fix the build.\n\nIt broke.",
        "publish": { "mode": "pr" },
    } } })
}

async fn replies(h: &Harness, owner: &str) -> Vec<Reply> {
    h.queue.claim_replies(owner, LEASE, 10).await.unwrap()
}

pub async fn a_delivery_makes_one_job_and_its_reply_is_due_with_it(h: Harness) {
    let (job, repeat) = h
        .queue
        .create_sourced_job(&request(), Some("github:alice"), &source("d-1"))
        .await
        .unwrap();
    assert!(!repeat);
    assert_eq!(job.payload["source"]["delivery"], json!("d-1"));
    let created = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    assert_eq!(
        created[0].payload["source"]["issue"],
        json!("https://github.com/octo/repo/issues/3")
    );
    // Again, and from another queue on the same database at once: the same job.
    let other = h.queue_with(|_| {}).await;
    let (raw, d1, d2) = (request(), source("d-1"), source("d-2"));
    let (a, b) = tokio::join!(
        h.queue.create_sourced_job(&raw, None, &d1),
        other.create_sourced_job(&raw, None, &d1),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!((&a.0.id, a.1, &b.0.id, b.1), (&job.id, true, &job.id, true));
    let (two, _) = tokio::join!(
        h.queue.create_sourced_job(&raw, None, &d2),
        other.create_sourced_job(&raw, None, &d2),
    );
    let (second, _) = two.unwrap();
    assert_eq!(h.count("SELECT count(*) FROM jobs").await, 2);
    assert_ne!(second.id, job.id);
    // A client may not name a source.
    let mut forged = request();
    forged["payload"]["source"] = json!(source("d-3"));
    let refused = h.queue.create_job(&forged, None).await.unwrap_err();
    assert!(refused.to_string().contains("source"), "{refused}");
    // A plain job has no reply.
    let plain = h.queue.create_job(&request(), None).await.unwrap();
    assert_eq!(h.queue.reply_state(&plain.id).await.unwrap(), None);
    assert_eq!(
        h.queue.reply_state(&job.id).await.unwrap(),
        Some(("due".to_string(), None))
    );
}

pub async fn a_reply_is_held_by_one_replica_and_due_again_when_its_job_ends(h: Harness) {
    let (job, _) = h
        .queue
        .create_sourced_job(&request(), None, &source("d-9"))
        .await
        .unwrap();
    let held = replies(&h, "r1").await;
    assert_eq!(held.len(), 1);
    assert_eq!((held[0].comment_id, held[0].attempt), (None, 1));
    assert!(replies(&h, "r2").await.is_empty(), "held by r1");
    // The job is claimed and ends while r1 writes its first comment.
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .complete(&job.id, &fence(&claimed), Some("done".into()))
        .await
        .unwrap();
    let posted = Replied::Posted {
        comment_id: 77,
        pull: None,
    };
    // Another owner's settle is refused; r1's keeps its comment but the reply stays due.
    assert!(!h.queue.settle_reply(&held[0], "r2", &posted).await.unwrap());
    assert!(h.queue.settle_reply(&held[0], "r1", &posted).await.unwrap());
    assert_eq!(
        h.queue.reply_state(&job.id).await.unwrap(),
        Some(("due".to_string(), Some(77)))
    );
    let again = replies(&h, "r2").await;
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].comment_id,
        Some(77),
        "the end edits the comment written"
    );
    let pull = "https://github.com/octo/repo/pull/5";
    let done = Replied::Done {
        comment_id: 77,
        pull: Some(pull.into()),
    };
    assert!(h.queue.settle_reply(&again[0], "r2", &done).await.unwrap());
    assert!(
        !h.queue.settle_reply(&again[0], "r2", &done).await.unwrap(),
        "settled once"
    );
    assert_eq!(
        h.queue.reply_state(&job.id).await.unwrap(),
        Some(("done".to_string(), Some(77)))
    );
    assert_eq!(h.queue.job_of_pull(pull).await.unwrap(), Some(job.id));
    assert!(replies(&h, "r1").await.is_empty());

    // A mention on its pull request: one round, however often it comes; a new reply there.
    let round = h
        .queue
        .mention_round(&job.id, "github:bob", 904, "add tests")
        .await
        .unwrap();
    let round = round.unwrap();
    assert_eq!((round.round, round.status), (2, JobState::Queued));
    assert_eq!(
        round.payload["task"]["rounds"][0]["causes"],
        json!(["comment:904"])
    );
    h.queue.reply_on(&job.id, pull).await.unwrap();
    let fresh = replies(&h, "r1").await;
    assert_eq!((fresh.len(), fresh[0].comment_id), (1, None));
    assert_eq!(fresh[0].issue, pull);
    let repeat = h
        .queue
        .mention_round(&job.id, "github:bob", 904, "add tests")
        .await;
    assert!(
        matches!(
            repeat,
            Ok(None) | Err(queue::QueueError::StateConflict { .. })
        ),
        "{repeat:?}"
    );
    assert_eq!(h.get(&job).await.round, 2);
    // A retry of a write GitHub did not take waits, then is due again.
    let later = Replied::Retry {
        next_at: h.queue.now() + chrono::Duration::seconds(60),
    };
    assert!(h.queue.settle_reply(&fresh[0], "r1", &later).await.unwrap());
    assert!(replies(&h, "r1").await.is_empty());
    h.advance(Duration::from_secs(61));
    let retried = replies(&h, "r1").await;
    assert_eq!(retried[0].failures, 1);
}
