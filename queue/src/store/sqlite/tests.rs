//! The writer and the checkpointer, driven directly.

use std::time::Duration;

use rusqlite::Connection;

use super::columns::*;
use super::writer::*;
use crate::store::Arg;

#[test]
fn dollar_placeholders_bind_by_number_not_by_position() {
    let conn = Connection::open_in_memory().unwrap();
    let mut stmt = conn.prepare("SELECT $2 || '-' || $1 || '-' || $2").unwrap();
    bind(&mut stmt, &[Arg::text("a"), Arg::text("b")]).unwrap();
    let mut rows = stmt.raw_query();
    let row = rows.next().unwrap().unwrap();
    assert_eq!(row.get::<_, String>(0).unwrap(), "b-a-b");
}

#[test]
fn a_placeholder_beyond_the_arguments_is_an_error_not_a_null() {
    let conn = Connection::open_in_memory().unwrap();
    let mut stmt = conn.prepare("SELECT $3").unwrap();
    assert!(bind(&mut stmt, &[Arg::text("a")]).is_err());
}

#[tokio::test]
async fn a_dropped_transaction_rolls_back_and_frees_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let writer = SqliteWriter::open(&dir.path().join("t.db"), Duration::from_secs(1)).unwrap();
    {
        let tx = writer.begin().await.unwrap();
        tx.conn()
            .execute_batch("CREATE TABLE t (x INTEGER)")
            .unwrap();
    }
    let tx = writer.begin().await.unwrap();
    let exists: i64 = tx
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 't'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(exists, 0);
    tx.rollback().unwrap();
}

async fn table(dir: &tempfile::TempDir) -> SqliteWriter {
    let writer = SqliteWriter::open(&dir.path().join("t.db"), Duration::from_secs(1)).unwrap();
    let tx = writer.begin().await.unwrap();
    tx.conn()
        .execute_batch("CREATE TABLE t (x INTEGER)")
        .unwrap();
    tx.commit().await.unwrap();
    writer
}

fn count(writer_dir: &tempfile::TempDir) -> i64 {
    // A separate connection: only what was committed is visible to it.
    let reader = Connection::open(writer_dir.path().join("t.db")).unwrap();
    reader
        .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_transactions_share_commits_and_a_rollback_undoes_only_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let writer = table(&dir).await;
    let mut tasks = Vec::new();
    for i in 0..200_i64 {
        let writer = writer.clone();
        tasks.push(tokio::spawn(async move {
            let tx = writer.begin().await.unwrap();
            tx.conn().execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
            if i % 2 == 0 {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(count(&dir), 100);
}

/// A writer whose first transaction holds the connection (one row written) while a
/// task running `then` is counted as waiting for it.
async fn first_with_one_waiting<F, Fut>(
    then: F,
) -> (
    tempfile::TempDir,
    SqliteWriter,
    SqliteTx,
    tokio::task::JoinHandle<()>,
)
where
    F: FnOnce(SqliteWriter) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let dir = tempfile::tempdir().unwrap();
    let writer = table(&dir).await;
    let first = writer.begin().await.unwrap();
    first
        .conn()
        .execute("INSERT INTO t VALUES (1)", [])
        .unwrap();
    let waiter = tokio::spawn(then(writer.clone()));
    while writer.waiting() == 0 {
        tokio::task::yield_now().await;
    }
    (dir, writer, first, waiter)
}

#[tokio::test]
async fn a_commit_returns_only_once_its_writes_are_visible_to_readers() {
    // A second transaction queues for the writer, so the first leaves its batch open
    // for it; the first commit must still not return before the batch committed.
    let (dir, writer, first, second) = first_with_one_waiting(|writer| async move {
        let tx = writer.begin().await.unwrap();
        tx.conn().execute("INSERT INTO t VALUES (2)", []).unwrap();
        tx.commit().await.unwrap();
    })
    .await;
    drop(writer);
    first.commit().await.unwrap();
    assert!(count(&dir) >= 1);
    second.await.unwrap();
    assert_eq!(count(&dir), 2);
}

#[tokio::test]
async fn a_waiter_that_gives_up_does_not_strand_an_open_batch() {
    let (dir, _writer, first, quitter) = first_with_one_waiting(|writer| async move {
        let _ = writer.begin().await;
    })
    .await;
    // Counted as waiting when the first commits, so the batch is left open for it;
    // then it gives up without ever taking the connection.
    let committing = tokio::spawn(first.commit());
    tokio::task::yield_now().await;
    quitter.abort();
    let committed = tokio::time::timeout(Duration::from_secs(10), committing)
        .await
        .expect("the commit must not wait forever for a waiter that left");
    committed.unwrap().unwrap();
    assert_eq!(count(&dir), 1);
}

#[tokio::test]
async fn under_steady_writes_the_wal_starts_over_instead_of_growing() {
    let dir = tempfile::tempdir().unwrap();
    let writer = table(&dir).await;
    // Commits back to back for two seconds, at least 5,000 of them, each of one row a
    // page long: the log would hold every one of those pages if it never started over.
    // How long the file gets before each restart depends on how often the checkpointer
    // thread is scheduled (a loaded CI machine once let it reach a third of what was
    // written), so what is asserted is the restarts themselves: SQLite counts them in
    // the WAL header's checkpoint sequence number, which it bumps each time the log
    // starts over. On a machine loaded by other tests the checkpointer's thread may not
    // get its turn within the two seconds (a CI run once saw none), so the writes go on
    // until the log started over, for at most half a minute.
    let wal_path = dir.path().join("t.db-wal");
    let restarts = || {
        let mut header = [0_u8; 16];
        std::io::Read::read_exact(&mut std::fs::File::open(&wal_path).unwrap(), &mut header)
            .unwrap();
        u32::from_be_bytes([header[12], header[13], header[14], header[15]])
    };
    let started = std::time::Instant::now();
    let mut commits = 0_u64;
    while commits < 5000
        || started.elapsed() < Duration::from_secs(2)
        || (restarts() == 0 && started.elapsed() < Duration::from_secs(30))
    {
        let tx = writer.begin().await.unwrap();
        tx.conn()
            .execute("INSERT INTO t VALUES (zeroblob(3000))", [])
            .unwrap();
        tx.commit().await.unwrap();
        commits += 1;
    }
    let written = commits * 4096;
    let wal = std::fs::metadata(&wal_path).unwrap().len();
    let restarts = restarts();
    assert!(
        restarts >= 1 && wal < written,
        "the WAL grew to {wal} bytes for {written} bytes of pages written and started over \
         {restarts} times: it must start over while writes go on"
    );
}

#[tokio::test]
async fn the_checkpointer_copies_the_wal_back_without_a_commit_paying_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let writer = table(&dir).await;
    for _ in 0..40 {
        let tx = writer.begin().await.unwrap();
        tx.conn()
            .execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) \
                 INSERT INTO t SELECT zeroblob(1000) FROM n",
                [],
            )
            .unwrap();
        tx.commit().await.unwrap();
    }
    // About 2 MB was written, all of it to the WAL first. Automatic checkpoints are off
    // and nothing here checkpoints, so the database file itself only grows once the
    // checkpointer copied the pages back.
    let file = dir.path().join("t.db");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&file).unwrap().len() < 1_500_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL was never checkpointed into {}",
            file.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_checkpoint_pass_says_whether_the_log_grew_since_the_last() {
    use super::checkpoint::{CheckpointConfig, Checkpointer};
    let dir = tempfile::tempdir().unwrap();
    let writer = table(&dir).await;
    let insert = || async {
        let tx = writer.begin().await.unwrap();
        tx.conn().execute("INSERT INTO t VALUES (1)", []).unwrap();
        tx.commit().await.unwrap();
    };
    insert().await;
    let path = dir.path().join("t.db");
    let config = CheckpointConfig::default();
    let mut pass = Checkpointer::new(
        &path,
        Duration::from_secs(1),
        std::sync::Weak::new(),
        config,
    )
    .unwrap();
    assert!(pass.run_once().unwrap(), "the first pass finds a log");
    assert!(!pass.run_once().unwrap(), "nothing was written since");
    insert().await;
    assert!(pass.run_once().unwrap(), "a commit since the last pass");
}
