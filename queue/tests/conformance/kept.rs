//! Issue 39's first step, seen from the tables: a job's claim and success are kept in its
//! row rather than as event rows, until a write would change what the row says of them;
//! then they become rows under the same ids. The golden timelines (`golden.rs`) hold what
//! readers see to what it was; these hold where it is kept, and the order of ids.

use std::time::Duration;

use contract::{JobEvent, JobId};
use queue::{Rescuer, RescuerConfig};
use serde_json::json;

use crate::golden::{complete, complete_all, every_reading, follow_up, run_step, task_job};
use crate::harness::*;

fn rows(kind: &str, id: JobId) -> String {
    format!("SELECT count(*) FROM job_events WHERE kind = '{kind}' AND job_id = '{id}'")
}

/// Whether the job's rows keep `column`: its own row, or for the claim its live row while
/// it has one (migration 0025); never both.
fn kept(column: &str, id: JobId) -> String {
    let own = format!("SELECT id FROM jobs WHERE {column} IS NOT NULL AND id = '{id}'");
    match column {
        "completed_event_id" => format!("SELECT count(*) FROM ({own}) AS kept"),
        _ => format!(
            "SELECT count(*) FROM ({own} UNION ALL \
             SELECT id FROM job_queue WHERE {column} IS NOT NULL AND id = '{id}') AS kept"
        ),
    }
}

/// Issue 39's first step, seen from the tables: a success writes no event row (its id is
/// in the job's row), one made in a batch neither; a next round writes it out as a row
/// under the same id before it changes the job; the timeline reads the same throughout.
pub async fn a_success_is_kept_in_its_row_until_the_job_changes_again(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    run_step(&h, &claimed, 0).await;
    complete(&h, &claimed).await;
    let rows = |id: JobId| rows("job.completed", id);
    let kept = |id: JobId| kept("completed_event_id", id);
    assert_eq!(h.count(&rows(job.id)).await, 0, "no event row");
    assert_eq!(h.count(&kept(job.id)).await, 1, "kept in the row");
    let before = every_reading(&h, &job.id).await;
    assert_eq!(before.last().unwrap().kind, "job.completed");

    // A batch's successes too, whichever way the batch is written.
    let batch = [task_job(&h, false).await, task_job(&h, false).await];
    let claimed = h.queue.claim_many(&request("w2"), 2).await.unwrap();
    complete_all(&h, &claimed).await;
    for job in &batch {
        assert_eq!(h.count(&rows(job.id)).await, 0);
        assert_eq!(h.count(&kept(job.id)).await, 1);
    }

    follow_up(&h, &job).await;
    assert_eq!(h.count(&rows(job.id)).await, 1, "written out");
    assert_eq!(h.count(&kept(job.id)).await, 0);
    let after = every_reading(&h, &job.id).await;
    assert_eq!(
        after[..before.len()],
        before[..],
        "the same events, the same ids"
    );
    assert_eq!(after.len(), before.len() + 1, "and the round's request");
}

/// The success's id is drawn after the completion has the job: a writer that holds the
/// job's lock (on PostgreSQL its live row's, then its own row's, as every write of a live
/// job takes them) and appends an event (changing nothing of the rows) while the completion
/// waits gets the smaller id, so a reader past that event still finds the success after it.
pub async fn a_success_kept_in_its_row_comes_after_an_event_appended_while_it_waited(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let Some(pool) = h.postgres_pool() else {
        // One writer: the completion and the event cannot interleave; in turn, they keep
        // their order.
        run_step(&h, &claimed, 0).await;
        complete(&h, &claimed).await;
        let events = every_reading(&h, &job.id).await;
        assert_eq!(events.last().unwrap().kind, "job.completed");
        return;
    };
    let mut holder = pool.begin().await.unwrap();
    for lock in [
        "SELECT id FROM job_queue WHERE id = $1 FOR UPDATE",
        "SELECT id FROM jobs WHERE id = $1 FOR UPDATE",
    ] {
        sqlx::query(lock)
            .bind(job.id.uuid())
            .execute(&mut *holder)
            .await
            .unwrap();
    }
    let queue = h.queue.clone();
    let fence = fence(&claimed);
    let completing = tokio::spawn(async move {
        queue
            .complete(&claimed.id, &fence, Some("done".into()))
            .await
            .unwrap()
    });
    // Long enough for the completion to reach the lock and wait there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !completing.is_finished(),
        "the completion waits for the row"
    );
    let appended: i64 = sqlx::query_scalar(
        "INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
         VALUES ($1, 'task.warning', 'warn', 'late', '{}', now()) RETURNING id",
    )
    .bind(job.id.uuid())
    .fetch_one(&mut *holder)
    .await
    .unwrap();
    holder.commit().await.unwrap();
    assert_eq!(
        completing.await.unwrap().status,
        contract::JobState::Succeeded
    );
    let events = every_reading(&h, &job.id).await;
    let success = events.last().unwrap();
    assert_eq!(success.kind, "job.completed");
    assert!(
        success.id > appended,
        "the success ({}) must come after the event appended while it waited ({appended})",
        success.id
    );
}

/// A claim writes no event row: its id, time and lease are in the job's row while the
/// attempt stands, through heartbeats (which move the row's lease, not the claim's), events
/// and a success; a next round writes both out, claim first, under their ids.
pub async fn a_claim_is_kept_in_its_row_while_its_attempt_stands(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    assert_eq!(
        h.count(&rows("job.claimed", job.id)).await,
        0,
        "no event row"
    );
    assert_eq!(h.count(&kept("claimed_event_id", job.id)).await, 1);
    let claim = every_reading(&h, &job.id).await[1].clone();
    assert_eq!(claim.kind, "job.claimed");
    assert_eq!(
        claim.payload["leaseExpiresAt"],
        json!(claimed.lease_expires_at)
    );

    h.advance(Duration::from_secs(5));
    let beat = h
        .queue
        .heartbeat(&job.id, &fence(&claimed), LEASE * 3)
        .await
        .unwrap();
    assert_ne!(beat.lease_expires_at, claimed.lease_expires_at);
    run_step(&h, &claimed, 0).await;
    complete(&h, &claimed).await;
    assert_eq!(h.count(&rows("job.claimed", job.id)).await, 0);
    assert_eq!(h.count(&kept("claimed_event_id", job.id)).await, 1);
    let before = every_reading(&h, &job.id).await;
    assert_eq!(before[1], claim, "the claim as it was made, lease and all");
    assert_eq!(
        h.queue.steps_finished(&[job.id]).await.unwrap()[&job.id],
        1,
        "counted since the claim the row keeps"
    );

    // A batch's claims too.
    let batch = [task_job(&h, false).await, task_job(&h, false).await];
    let many = h.queue.claim_many(&request("w2"), 2).await.unwrap();
    assert_eq!(many.len(), 2);
    for job in &batch {
        assert_eq!(h.count(&rows("job.claimed", job.id)).await, 0);
        assert_eq!(h.count(&kept("claimed_event_id", job.id)).await, 1);
    }

    follow_up(&h, &job).await;
    claims_written_out(&h, job.id, 1, &before, "written out by the next round").await;
}

/// Whatever ends an attempt other than a success (a retry, a lost lease, a cancel, a
/// pause) writes the claim out first, as it read; the next claim is kept again, and steps
/// are counted from it.
pub async fn a_claim_is_written_out_when_its_attempt_ends_otherwise(h: Harness) {
    let job = task_job(&h, false).await;
    let first = h.claim_exactly("w1", &job).await;
    run_step(&h, &first, 0).await;
    let before = every_reading(&h, &job.id).await;
    h.queue
        .fail(&job.id, &fence(&first), "the network went".into(), true)
        .await
        .unwrap();
    claims_written_out(&h, job.id, 1, &before, "a retry").await;

    h.advance(Duration::from_secs(3600));
    let second = h.claim_exactly("w2", &job).await;
    assert_eq!(h.count(&kept("claimed_event_id", job.id)).await, 1);
    assert!(
        !h.queue
            .steps_finished(&[job.id])
            .await
            .unwrap()
            .contains_key(&job.id),
        "no step finished since the second claim"
    );
    run_step(&h, &second, 0).await;
    let before = every_reading(&h, &job.id).await;
    h.advance(LEASE * 2);
    let rescuer = Rescuer::new(h.queue.clone(), RescuerConfig::default());
    assert_eq!(rescuer.run_once().await.unwrap().total(), 1);
    claims_written_out(&h, job.id, 2, &before, "a lost lease").await;

    // A cancel: asked, the attempt stands; acknowledged, it ends.
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w3", &job).await;
    let before = every_reading(&h, &job.id).await;
    h.queue
        .request_cancel(&job.id, Some("bob"), None)
        .await
        .unwrap();
    assert_eq!(h.count(&kept("claimed_event_id", job.id)).await, 1, "asked");
    h.queue.ack_cancel(&job.id, &fence(&claimed)).await.unwrap();
    claims_written_out(&h, job.id, 1, &before, "cancelled").await;

    // A pause: asked, the attempt stands; obeyed, it ends.
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w4", &job).await;
    let before = every_reading(&h, &job.id).await;
    h.queue
        .request_pause(&job.id, Some("bob"), true)
        .await
        .unwrap();
    assert_eq!(h.count(&kept("claimed_event_id", job.id)).await, 1, "asked");
    let paused = h.queue.ack_pause(&job.id, &fence(&claimed)).await.unwrap();
    assert_eq!(paused.status, contract::JobState::Paused);
    claims_written_out(&h, job.id, 1, &before, "paused").await;
}

/// After `why` ended an attempt: the job's claims are `n` event rows, its row keeps none,
/// and its timeline still begins with `before`, the same events under the same ids.
async fn claims_written_out(h: &Harness, id: JobId, n: i64, before: &[JobEvent], why: &str) {
    assert_eq!(h.count(&rows("job.claimed", id)).await, n, "{why}");
    assert_eq!(h.count(&kept("claimed_event_id", id)).await, 0, "{why}");
    assert_eq!(
        every_reading(h, &id).await[..before.len()],
        before[..],
        "{why}"
    );
}

/// The claim's id is drawn after the claim has the row, so every event of the job that
/// committed before it has a smaller id, and the job's events read in the order they
/// happened: created, claimed, the step.
pub async fn a_kept_claim_reads_in_order_with_the_job_s_events(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    run_step(&h, &claimed, 0).await;
    let events = every_reading(&h, &job.id).await;
    assert_eq!(events[0].kind, "job.created");
    assert_eq!(events[1].kind, "job.claimed");
    assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(
        h.queue.count_events(&job.id).await.unwrap(),
        events.len() as u64
    );
}

/// A claim never waits for a row another writer holds (it skips it), and draws its id
/// once it holds the row: an event appended under another writer's lock before the claim
/// gets the smaller id, so a reader past that event still finds the claim after it.
pub async fn a_kept_claim_comes_after_an_event_appended_under_another_lock(h: Harness) {
    let job = task_job(&h, false).await;
    let Some(pool) = h.postgres_pool() else {
        // One writer: nothing can hold the row while a claim runs.
        h.claim_exactly("w1", &job).await;
        let events = every_reading(&h, &job.id).await;
        assert_eq!(events.last().unwrap().kind, "job.claimed");
        return;
    };
    // Held as a write under the job's lock holds it: its live row, then its row.
    let mut holder = pool.begin().await.unwrap();
    for held in [
        "SELECT id FROM job_queue WHERE id = $1 FOR UPDATE",
        "SELECT id FROM jobs WHERE id = $1 FOR UPDATE",
    ] {
        sqlx::query(held)
            .bind(job.id.uuid())
            .execute(&mut *holder)
            .await
            .unwrap();
    }
    assert!(h.claim("w1").await.is_none(), "the held row is skipped");
    let appended: i64 = sqlx::query_scalar(
        "INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
         VALUES ($1, 'task.warning', 'warn', 'late', '{}', now()) RETURNING id",
    )
    .bind(job.id.uuid())
    .fetch_one(&mut *holder)
    .await
    .unwrap();
    holder.commit().await.unwrap();
    h.claim_exactly("w1", &job).await;
    let events = every_reading(&h, &job.id).await;
    let claim = events.last().unwrap();
    assert_eq!(claim.kind, "job.claimed");
    assert!(claim.id > appended, "{} > {appended}", claim.id);
}

/// Events appended to a job that succeeded (a webhook's delivery recorded) leave what its
/// row keeps where it is: only a write that changes the job writes it out.
pub async fn a_success_stays_kept_while_events_are_appended_after_it(h: Harness) {
    let job = task_job(&h, false).await;
    let claimed = h.claim_exactly("w1", &job).await;
    complete(&h, &claimed).await;
    let before = every_reading(&h, &job.id).await;
    let recorded = h
        .queue
        .record_notification(&job.id, true, "delivered".into(), Default::default())
        .await
        .unwrap();
    for (kind, column) in [
        ("job.claimed", "claimed_event_id"),
        ("job.completed", "completed_event_id"),
    ] {
        assert_eq!(h.count(&rows(kind, job.id)).await, 0, "{kind}");
        assert_eq!(h.count(&kept(column, job.id)).await, 1, "{kind}");
    }
    let after = every_reading(&h, &job.id).await;
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(after.last().unwrap().id, recorded.id);
    assert!(recorded.id > before.last().unwrap().id);
}
