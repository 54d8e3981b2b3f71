//! The committer's line: who shares a statement, who waits, and the connections it keeps.

use super::*;
use std::time::Duration;

/// A pool that never connects: these tests write nothing to a database.
fn no_pool() -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .connect_lazy("postgres://nobody@127.0.0.1:1/none")
        .unwrap()
}

/// The values of each batch a recording committer's "statement" wrote, in order.
type Batches = Arc<Mutex<Vec<Vec<u32>>>>;

/// A committer whose "statement" records its batch and answers each write with its
/// value, after `delay`. A write is (key, value).
fn recording(delay: Duration) -> (Committer<(u128, u32), u32>, Batches) {
    recording_line(delay, false)
}

/// [`recording`], gathering or not.
fn recording_line(delay: Duration, gathers: bool) -> (Committer<(u128, u32), u32>, Batches) {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let seen = batches.clone();
    let key = |w: &(u128, u32)| Some(Uuid::from_u128(w.0));
    let committer = Committer::line(
        no_pool(),
        key,
        move |lent, writes: Vec<(u128, u32)>| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(writes.iter().map(|w| w.1).collect());
                tokio::time::sleep(delay).await;
                (lent, writes.into_iter().map(|w| Ok(w.1)).collect())
            }
        },
        gathers,
    );
    (committer, batches)
}

/// `writers` loops that each write `rounds` times, each write as soon as the one before was
/// answered, as a worker's complete-and-claim does; the time it took.
async fn looping_writers(
    committer: &Committer<(u128, u32), u32>,
    writers: u32,
    rounds: u32,
) -> Duration {
    let started = tokio::time::Instant::now();
    let loops: Vec<_> = (0..writers)
        .map(|w| {
            let committer = committer.clone();
            tokio::spawn(async move {
                for round in 0..rounds {
                    let value = w * 1000 + round;
                    assert_eq!(
                        committer.write((u128::from(w), value)).await.unwrap(),
                        value
                    );
                }
            })
        })
        .collect();
    for one in loops {
        one.await.unwrap();
    }
    started.elapsed()
}

fn spawn_write(
    committer: &Committer<(u128, u32), u32>,
    write: (u128, u32),
) -> tokio::task::JoinHandle<Result<u32, QueueError>> {
    let committer = committer.clone();
    tokio::spawn(async move { committer.write(write).await })
}

#[tokio::test]
async fn a_write_on_an_idle_line_goes_out_alone_and_at_once() {
    let (committer, batches) = recording(Duration::ZERO);
    assert_eq!(committer.write((1, 10)).await.unwrap(), 10);
    assert_eq!(committer.write((1, 11)).await.unwrap(), 11);
    assert_eq!(*batches.lock().unwrap(), vec![vec![10], vec![11]]);
}

#[tokio::test]
async fn writes_that_wait_while_statements_run_share_the_next_one() {
    let (committer, batches) = recording(Duration::from_millis(50));
    let writes: Vec<_> = (0..10u32)
        .map(|n| spawn_write(&committer, (u128::from(n), n * 10)))
        .collect();
    for (n, write) in writes.into_iter().enumerate() {
        assert_eq!(write.await.unwrap().unwrap(), n as u32 * 10);
    }
    let batches = batches.lock().unwrap();
    // As many went out alone as statements may run; the rest, which waited, together.
    assert_eq!(batches.len(), IN_FLIGHT + 1, "{batches:?}");
    let mut all: Vec<u32> = batches.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..10).map(|n| n * 10).collect::<Vec<_>>());
}

#[tokio::test]
async fn two_writes_of_one_key_never_share_a_statement() {
    let (committer, batches) = recording(Duration::from_millis(20));
    let writes: Vec<_> = [(1, 1), (2, 2), (7, 3), (7, 4), (7, 5), (3, 6)]
        .into_iter()
        .map(|w| spawn_write(&committer, w))
        .collect();
    for write in writes {
        write.await.unwrap().unwrap();
    }
    let batches = batches.lock().unwrap();
    for batch in batches.iter() {
        let sevens = batch.iter().filter(|v| (3..=5).contains(*v)).count();
        assert!(sevens <= 1, "{batches:?}");
    }
    assert_eq!(batches.iter().flatten().count(), 6, "{batches:?}");
}

#[tokio::test]
async fn a_writer_that_stops_waiting_loses_nobody_else_their_answer() {
    // Long enough that every statement still runs when the waiting writer gives up.
    let (committer, batches) = recording(Duration::from_millis(500));
    // Every statement busy, so the next two writes share the next one.
    let busy: Vec<_> = (0..IN_FLIGHT as u32)
        .map(|n| spawn_write(&committer, (u128::from(n) + 10, n + 10)))
        .collect();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let gone = tokio::time::timeout(Duration::from_millis(5), committer.write((1, 1))).await;
    assert!(gone.is_err(), "the write should still be waiting");
    assert_eq!(committer.write((2, 2)).await.unwrap(), 2);
    for write in busy {
        write.await.unwrap().unwrap();
    }
    assert!(batches.lock().unwrap().contains(&vec![1, 2]));
}

#[tokio::test]
async fn a_writer_that_stops_while_its_own_statement_runs_still_frees_its_place() {
    // The statement far outlasts the writer's patience: a timeout whose inner future is
    // ready when it is polled answers that, so on a loaded machine a statement of 30 ms
    // could end before a 5 ms timeout was looked at.
    let (committer, _) = recording(Duration::from_millis(500));
    for n in 0..IN_FLIGHT as u128 {
        let gone = tokio::time::timeout(Duration::from_millis(5), committer.write((n, 0))).await;
        assert!(gone.is_err());
    }
    let answer = tokio::time::timeout(Duration::from_secs(5), committer.write((9, 9))).await;
    assert_eq!(answer.expect("the line must not stay blocked").unwrap(), 9);
}

/// A committer whose statement answers the server process it ran on, or fails as
/// the server refuses `SELECT 1/0` when its write is 0.
fn backends(pool: PgPool) -> Committer<u32, i32> {
    Committer::new(
        pool,
        |_| None,
        |mut lent, writes: Vec<u32>| async move {
            let mut answers = Vec::new();
            for write in writes {
                let sql = if write == 0 {
                    "SELECT 1/0"
                } else {
                    "SELECT pg_backend_pid()"
                };
                let answer = lent
                    .run(async |conn| Ok(sqlx::query_scalar(sql).fetch_one(conn).await?))
                    .await;
                answers.push(answer);
            }
            (lent, answers)
        },
    )
}

/// Waits up to five seconds for `done`, which the pool's work on tasks of its own
/// makes true a little later; fails naming `what` did not happen.
async fn within_seconds(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "not {what} in time");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A pool of the scratch database's own, which no one else has used.
async fn fresh_pool(scratch: &crate::ScratchPostgres) -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(scratch.url())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_line_keeps_the_connection_its_statement_ran_on_for_the_next() {
    let (scratch, _db, _) = super::super::scratch("stepwise_t_kept").await;
    let pool = fresh_pool(&scratch).await;
    let committer = backends(pool.clone());
    let first = committer.write(1).await.unwrap();
    for _ in 0..5 {
        assert_eq!(committer.write(1).await.unwrap(), first);
    }
    // Kept by the line, not given back: nothing idle in the pool, one connection open.
    assert_eq!((pool.size(), pool.num_idle()), (1, 0));
    drop(committer);
    scratch.drop_database().await.unwrap();
}

#[tokio::test]
async fn a_line_gives_a_connection_whose_statement_failed_back_to_the_pool() {
    let (scratch, _db, _) = super::super::scratch("stepwise_t_given").await;
    let pool = fresh_pool(&scratch).await;
    let committer = backends(pool.clone());
    committer.write(1).await.unwrap();
    assert!(committer.write(0).await.is_err());
    // Given back, the pool tests it on its own task: wait for it to be idle there.
    within_seconds("given back to the pool", async || pool.num_idle() == 1).await;
    assert_eq!((pool.size(), pool.num_idle()), (1, 1));
    // The next statement takes a connection from the pool again, and the line keeps it.
    committer.write(1).await.unwrap();
    assert_eq!(pool.num_idle(), 0);
    drop(committer);
    scratch.drop_database().await.unwrap();
}

#[tokio::test]
async fn a_connection_whose_transaction_failed_is_not_left_inside_it() {
    let (scratch, _db, _) = super::super::scratch("stepwise_t_rolled").await;
    let pool = fresh_pool(&scratch).await;
    // A line whose write opens a transaction that the server refuses, and answers the
    // write as done, as a finish's conflict is answered as a row that changed.
    let committer: Committer<u32, ()> = Committer::new(
        pool.clone(),
        |_| None,
        |mut lent, writes: Vec<u32>| async move {
            let refused = lent
                .run(async |conn| {
                    let mut tx = sqlx::Connection::begin(conn).await?;
                    sqlx::query("SELECT 1/0").execute(&mut *tx).await?;
                    tx.commit().await?;
                    Ok(())
                })
                .await;
            assert!(refused.is_err());
            (lent, writes.iter().map(|_| Ok(())).collect())
        },
    );
    committer.write(1).await.unwrap();
    within_seconds(
        "no connection left inside its failed transaction",
        async || {
            let inside: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            inside == 0
        },
    )
    .await;
    drop(committer);
    scratch.drop_database().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn writers_that_come_straight_back_share_every_statement_on_a_gathering_line() {
    let (committer, batches) = recording_line(Duration::from_micros(400), true);
    looping_writers(&committer, 4, 30).await;
    let batches = batches.lock().unwrap();
    // The first write finds the line idle and goes alone; from then on every statement
    // carries all four, but the last, which the writer that went first no longer joins.
    let between = &batches[1..batches.len() - 1];
    assert!(between.iter().all(|b| b.len() == 4), "{batches:?}");
    assert_eq!(batches.iter().flatten().count(), 4 * 30);
}

#[tokio::test(start_paused = true)]
async fn on_a_line_that_does_not_gather_the_same_writers_take_turns() {
    let (committer, batches) = recording_line(Duration::from_micros(400), false);
    looping_writers(&committer, 4, 30).await;
    let batches = batches.lock().unwrap();
    // What a gathering line is for: here no statement after the first carries all four.
    assert!(batches.iter().skip(1).all(|b| b.len() < 4), "{batches:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lone_writer_on_a_gathering_line_never_waits_and_a_crowd_that_stays_away_costs_one_wait()
{
    let statement = Duration::from_millis(1);
    let (committer, batches) = recording_line(statement, true);
    // Alone from the start: its statements one after the other, and nothing else (the
    // clock only moves when every task waits on it).
    assert_eq!(looping_writers(&committer, 1, 50).await, 50 * statement);
    // Four at once, each writing once: one goes first and three wait for it; the next
    // statement then waits for the first writer to come back, in vain, once, and the line
    // stops gathering.
    let started = tokio::time::Instant::now();
    let crowd: Vec<_> = (0..4u32)
        .map(|w| spawn_write(&committer, (u128::from(w), 100 + w)))
        .collect();
    for write in crowd {
        write.await.unwrap().unwrap();
    }
    let took = started.elapsed();
    assert!(
        took >= 2 * statement + GATHER_WAIT && took <= 2 * statement + 2 * GATHER_WAIT,
        "{took:?}"
    );
    assert_eq!(batches.lock().unwrap().last().map(Vec::len), Some(3));
    // A writer alone again waits for nobody.
    assert_eq!(looping_writers(&committer, 1, 50).await, 50 * statement);
    assert_eq!(
        batches.lock().unwrap().iter().flatten().count(),
        50 + 4 + 50
    );
}
