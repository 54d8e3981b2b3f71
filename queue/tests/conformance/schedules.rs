//! Recurring tasks: a request's problems named by field; a slot makes exactly one job
//! however many replicas pass at once; `skip` makes none while the previous job goes on;
//! missed slots after downtime are not run, or only the latest with `catchUp`; a paused
//! schedule makes nothing and resumes from its next slot.

use std::time::Duration;

use contract::source::JobSource;
use serde_json::{Value, json};

use crate::harness::*;

const LEASE: Duration = Duration::from_secs(60);
const GRACE: Duration = Duration::from_secs(120);

fn request(name: &str, overlap: &str, catch_up: bool) -> Value {
    json!({
        "name": name,
        "cron": "0 * * * *",
        "timezone": "Europe/Berlin",
        "overlap": overlap,
        "catchUp": catch_up,
        "task": { "payload": { "repository": "octo/repo", "task": { "instructions": "Update the dependencies." } } },
    })
}

/// Moves the clock to `seconds` past the schedule's next slot.
async fn to_slot(h: &Harness, id: &str, seconds: i64) {
    let schedule = h.queue.get_schedule(id).await.unwrap();
    let wait = schedule.next_at - h.queue.now() + chrono::Duration::seconds(seconds);
    h.advance(wait.to_std().unwrap());
}

async fn pass(h: &Harness, owner: &str) -> usize {
    h.queue.run_schedules(owner, LEASE, GRACE).await.unwrap()
}

async fn jobs(h: &Harness) -> i64 {
    h.count("SELECT count(*) FROM jobs").await
}

pub async fn a_schedule_s_problems_are_named_by_their_field(h: Harness) {
    let bad = json!({
        "name": "",
        "cron": "0 6 * *",
        "timezone": "Europe/Atlantis",
        "overlap": "sometimes",
        "catchUp": "yes",
        "task": { "payload": { "repository": "", "task": { "instructions": "x" } } },
        "colour": "blue",
    });
    let error = h.queue.create_schedule(&bad, None).await.unwrap_err();
    let queue::QueueError::Invalid(errors) = error else {
        panic!("{error}")
    };
    let mut fields: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "catchUp",
            "colour",
            "cron",
            "name",
            "overlap",
            "task.repository",
            "timezone"
        ],
        "{errors:?}"
    );
    let wrong_zone = json!({ "name": "n", "cron": "0 6 * * 1", "timezone": "Mars/Olympus", "task": request("x", "skip", false)["task"] });
    let error = h
        .queue
        .create_schedule(&wrong_zone, None)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("timezone"), "{error}");
    let made = h
        .queue
        .create_schedule(&request("deps", "skip", false), Some("alice"))
        .await
        .unwrap();
    assert_eq!(
        (made.timezone.as_str(), made.paused, made.catch_up),
        ("Europe/Berlin", false, false)
    );
    let again = h
        .queue
        .create_schedule(&request("deps", "queue", true), None)
        .await
        .unwrap_err();
    assert!(again.to_string().contains("name"), "{again}");
    let listed = h.queue.list_schedules().await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&made));
    assert_eq!(h.queue.get_schedule(&made.id).await.unwrap(), made);
    assert!(h.queue.get_schedule("not-an-id").await.is_err());
    h.queue.delete_schedule(&made.id).await.unwrap();
    assert!(h.queue.list_schedules().await.unwrap().is_empty());
    assert!(h.queue.delete_schedule(&made.id).await.is_err());
}

pub async fn a_slot_makes_exactly_one_job_however_many_replicas_pass(h: Harness) {
    let made = h
        .queue
        .create_schedule(&request("deps", "queue", false), Some("alice"))
        .await
        .unwrap();
    assert_eq!(pass(&h, "r1").await, 0, "not due yet");
    to_slot(&h, &made.id, 1).await;
    let other = h.queue_with(|_| {}).await;
    let (a, b) = tokio::join!(
        h.queue.run_schedules("r1", LEASE, GRACE),
        other.run_schedules("r2", LEASE, GRACE),
    );
    assert_eq!(a.unwrap() + b.unwrap(), 1);
    assert_eq!(jobs(&h).await, 1);
    let after = h.queue.get_schedule(&made.id).await.unwrap();
    let job = h.queue.get_job(&after.last_job_id.unwrap()).await.unwrap();
    let JobSource::Schedule {
        schedule,
        name,
        slot,
    } = serde_json::from_value(job.payload["source"].clone()).unwrap()
    else {
        panic!("{}", job.payload["source"]);
    };
    assert_eq!(
        (schedule.as_str(), name.as_str()),
        (made.id.as_str(), "deps")
    );
    assert_eq!(
        slot,
        made.next_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    assert_eq!(job.created_by_user_id.as_deref(), Some("alice"));
    assert_eq!(after.next_at, made.next_at + chrono::Duration::hours(1));
    assert_eq!(after.last_slot, Some(made.next_at));
    // The same slot again (a replica whose lease ran out, say): still one job.
    let (job_again, repeat) = h
        .queue
        .create_sourced_job(
            &made.task,
            None,
            &JobSource::Schedule {
                schedule: made.id.clone(),
                name: "deps".into(),
                slot,
            },
        )
        .await
        .unwrap();
    assert!(repeat);
    assert_eq!(job_again.id, job.id);
    // `queue`: the next slot queues its job though the first still waits.
    to_slot(&h, &made.id, 1).await;
    assert_eq!(pass(&h, "r1").await, 1);
    assert_eq!(jobs(&h).await, 2);
}

pub async fn skip_makes_no_job_while_the_previous_one_goes_on(h: Harness) {
    let made = h
        .queue
        .create_schedule(&request("deps", "skip", false), None)
        .await
        .unwrap();
    to_slot(&h, &made.id, 1).await;
    assert_eq!(pass(&h, "r1").await, 1);
    let first = h
        .queue
        .get_schedule(&made.id)
        .await
        .unwrap()
        .last_job_id
        .unwrap();
    // Still queued at the next slot: skipped.
    to_slot(&h, &made.id, 1).await;
    assert_eq!(pass(&h, "r1").await, 0);
    let after = h.queue.get_schedule(&made.id).await.unwrap();
    assert_eq!((after.skipped, after.last_job_id), (1, Some(first)));
    // Once it ended, the next slot makes a job.
    let job = h.queue.get_job(&first).await.unwrap();
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .complete(&first, &fence(&claimed), None)
        .await
        .unwrap();
    to_slot(&h, &made.id, 1).await;
    assert_eq!(pass(&h, "r1").await, 1);
    assert_eq!(jobs(&h).await, 2);
}

pub async fn missed_slots_run_at_most_the_latest_and_only_with_catch_up(h: Harness) {
    let plain = h
        .queue
        .create_schedule(&request("plain", "queue", false), None)
        .await
        .unwrap();
    let eager = h
        .queue
        .create_schedule(&request("eager", "queue", true), None)
        .await
        .unwrap();
    // Five hours with no server, then a pass.
    to_slot(&h, &plain.id, 5 * 3600 - 10).await;
    assert_eq!(pass(&h, "r1").await, 1, "only the eager one's latest slot");
    let plain = h.queue.get_schedule(&plain.id).await.unwrap();
    let eager = h.queue.get_schedule(&eager.id).await.unwrap();
    assert_eq!((plain.skipped, plain.last_job_id), (5, None));
    assert_eq!(eager.skipped, 4);
    let job = h.queue.get_job(&eager.last_job_id.unwrap()).await.unwrap();
    let latest = eager.last_slot.unwrap();
    assert_eq!(
        job.payload["source"]["slot"],
        json!(latest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    );
    assert!(eager.next_at > h.queue.now());
    // A second pass runs nothing twice.
    assert_eq!(pass(&h, "r2").await, 0);
    assert_eq!(jobs(&h).await, 1);
}

pub async fn a_paused_schedule_makes_nothing_and_resumes_at_its_next_slot(h: Harness) {
    let made = h
        .queue
        .create_schedule(&request("deps", "queue", true), None)
        .await
        .unwrap();
    let paused = h.queue.pause_schedule(&made.id).await.unwrap();
    assert!(paused.paused);
    to_slot(&h, &made.id, 3 * 3600).await;
    assert_eq!(pass(&h, "r1").await, 0);
    let resumed = h.queue.resume_schedule(&made.id).await.unwrap();
    assert!(!resumed.paused);
    assert!(
        resumed.next_at > h.queue.now(),
        "the slots it was paused through are not run"
    );
    assert_eq!(pass(&h, "r1").await, 0);
    to_slot(&h, &made.id, 1).await;
    assert_eq!(pass(&h, "r1").await, 1);
    assert!(
        h.queue
            .pause_schedule("0190b1a4-0000-7000-8000-000000000001")
            .await
            .is_err()
    );
}
