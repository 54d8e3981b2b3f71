//! Writes of one live job against each other, in `live.rs`'s order (its live row first): a
//! swap waits for the holder of the live row, then keeps nothing over its write; a lock of
//! a job made live meanwhile ends up holding its new live row.

use std::time::Duration;

use super::tests::{completed, request, scratch_queue, task};
use super::*;
use sqlx::PgPool;

/// A running job, and a transaction that holds its live row, as every write of a live
/// job takes it first.
async fn running_and_held(
    name: &str,
) -> (
    crate::ScratchPostgres,
    PgPool,
    Job,
    sqlx::Transaction<'static, Postgres>,
) {
    let (scratch, queue, pool) = scratch_queue(name).await;
    queue.create_job(&task(), Some("alice")).await.unwrap();
    let running = queue.claim(&request()).await.unwrap().unwrap();
    let mut held = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM job_queue WHERE id = $1 FOR UPDATE")
        .bind(running.id.uuid())
        .execute(&mut *held)
        .await
        .unwrap();
    (scratch, pool, running, held)
}

/// The success of `job`, written on its own connection while the test holds the live row,
/// its statement run as `run` says (in a transaction of its own, committed if it wrote):
/// its answer, once the holder let go.
fn succeed_meanwhile(
    pool: &PgPool,
    job: &Job,
    run: Statements,
) -> tokio::task::JoinHandle<Result<Vec<Swapped>, QueueError>> {
    let (pool, swap) = (pool.clone(), completed(job));
    tokio::spawn(async move {
        if run == Statements::Alone {
            let mut conn = pool.acquire().await.unwrap();
            return write_jobs_if_unchanged(&mut conn, &[&swap], run).await;
        }
        let mut tx = pool.begin().await.unwrap();
        let answer = write_jobs_if_unchanged(&mut tx, &[&swap], run).await;
        if answer.is_ok() {
            tx.commit().await.unwrap();
        }
        answer
    })
}

/// What the job's rows hold: its own status and cancel reason, and whether it is live.
async fn rows(pool: &PgPool, job: &Job) -> (String, Option<String>, bool) {
    sqlx::query_as(
        "SELECT j.status, j.cancel_reason, EXISTS (SELECT 1 FROM job_queue q WHERE q.id = j.id) \
         FROM jobs j WHERE j.id = $1",
    )
    .bind(job.id.uuid())
    .fetch_one(pool)
    .await
    .unwrap()
}

/// A cancel asked under the lock, as the locked path writes one: the job's row and its
/// live row written; `same_live` leaves the live row's values as they were.
async fn ask_cancel(held: &mut sqlx::Transaction<'static, Postgres>, job: &Job, same_live: bool) {
    sqlx::query(
        "UPDATE jobs SET cancel_requested_at = now(), cancel_reason = 'stop' WHERE id = $1",
    )
    .bind(job.id.uuid())
    .execute(&mut **held)
    .await
    .unwrap();
    let live = if same_live {
        "UPDATE job_queue SET updated_at = updated_at WHERE id = $1"
    } else {
        "UPDATE job_queue SET updated_at = updated_at + interval '1 ms' WHERE id = $1"
    };
    sqlx::query(live)
        .bind(job.id.uuid())
        .execute(&mut **held)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_success_waits_for_the_holder_of_the_live_row_and_finds_its_write() {
    let (scratch, pool, running, mut held) = running_and_held("stepwise_t_race_live").await;
    ask_cancel(&mut held, &running, false).await;
    let success = succeed_meanwhile(&pool, &running, Statements::Alone);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!success.is_finished(), "the success waits for the live row");
    held.commit().await.unwrap();
    let answer = success.await.unwrap().unwrap();
    assert_eq!(answer, vec![None], "the rows changed since they were read");
    assert_eq!(
        rows(&pool, &running).await,
        ("queued".into(), Some("stop".into()), true),
        "the job is as the holder left it (its own status as it was made)"
    );
    scratch.drop_database().await.unwrap();
}

/// The guard (`whole!`): a holder that changed the job's row and left the live row's values
/// exactly as they were (its time in the same millisecond) is found by the success's
/// update, and the statement keeps nothing: in a transaction it fails with the conflict,
/// on its own it answers a row that changed.
#[tokio::test]
async fn a_success_keeps_nothing_over_a_change_only_the_job_s_row_shows() {
    for run in [Statements::InTransaction, Statements::Alone] {
        let (scratch, pool, running, mut held) = running_and_held("stepwise_t_race_own").await;
        ask_cancel(&mut held, &running, true).await;
        let success = succeed_meanwhile(&pool, &running, run);
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.commit().await.unwrap();
        match success.await.unwrap() {
            Err(failed) => assert!(
                run == Statements::InTransaction && conflicted(&failed),
                "{failed:?}"
            ),
            Ok(answer) => assert_eq!((run, answer), (Statements::Alone, vec![None])),
        }
        assert_eq!(
            rows(&pool, &running).await,
            ("queued".into(), Some("stop".into()), true),
            "{run:?}: nothing of the success was kept"
        );
        scratch.drop_database().await.unwrap();
    }
}

/// An event appended by a write that held the live row gets the smaller id: the success's
/// id is drawn once its delete holds the live row, so the timeline's order is the order the
/// two were written in.
#[tokio::test]
async fn a_success_after_an_event_appended_under_the_live_row_has_the_larger_id() {
    let (scratch, pool, running, mut held) = running_and_held("stepwise_t_race_order").await;
    let appended: i64 = sqlx::query_scalar(
        "INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
         VALUES ($1, 'task.step.started', 'info', 'step 1', '{}', now()) RETURNING id",
    )
    .bind(running.id.uuid())
    .fetch_one(&mut *held)
    .await
    .unwrap();
    let success = succeed_meanwhile(&pool, &running, Statements::Alone);
    tokio::time::sleep(Duration::from_millis(300)).await;
    held.commit().await.unwrap();
    let answer = success.await.unwrap().unwrap();
    let [Some(ids)] = &answer[..] else {
        panic!("the success is written: {answer:?}")
    };
    assert!(
        ids.iter().all(|&id| id > appended),
        "{ids:?} after {appended}"
    );
    scratch.drop_database().await.unwrap();
}

/// A transaction that locks a job a write was making live meanwhile: its first run finds
/// no live row to lock and waits on the job's row; once the write commits it runs again
/// from its savepoint and holds both rows, the live row included.
#[tokio::test]
async fn a_lock_of_a_job_made_live_meanwhile_holds_its_new_live_row() {
    let (scratch, queue, pool) = scratch_queue("stepwise_t_race_made_live").await;
    let job = queue.create_job(&task(), Some("alice")).await.unwrap();
    let running = queue.claim(&request()).await.unwrap().unwrap();
    let fence = crate::lease::Fence::of(&running).unwrap();
    queue
        .fail(&running.id, &fence, "no".into(), false)
        .await
        .unwrap();
    let id = job.id.uuid();
    let mut making = pool.begin().await.unwrap();
    for write in [
        "UPDATE jobs SET status = 'queued', finished_at = NULL WHERE id = $1",
        "INSERT INTO job_queue (id, priority, created_at, job_type, repository, \
         required_capabilities, next_attempt_at, status, attempt, updated_at) \
         SELECT id, priority, created_at, job_type, repository, required_capabilities, \
           now(), 'queued', attempt, now() FROM jobs WHERE id = $1",
    ] {
        sqlx::query(write)
            .bind(id)
            .execute(&mut *making)
            .await
            .unwrap();
    }
    let locker = pool.clone();
    let locking = tokio::spawn(async move {
        let mut tx = locker.begin().await.unwrap();
        let locked = super::super::lock_jobs(&mut tx, &[id]).await.unwrap();
        (tx, locked)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!locking.is_finished(), "the lock waits for the job's row");
    making.commit().await.unwrap();
    let (tx, locked) = locking.await.unwrap();
    assert_eq!(locked.len(), 1);
    assert_eq!(locked[0].0.status, contract::JobState::Queued);
    let taken = sqlx::query("SELECT 1 FROM job_queue WHERE id = $1 FOR UPDATE NOWAIT")
        .bind(id)
        .execute(&pool)
        .await;
    assert!(taken.is_err(), "the new live row is held: {taken:?}");
    tx.rollback().await.unwrap();
    scratch.drop_database().await.unwrap();
}
