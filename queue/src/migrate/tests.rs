use super::*;

fn files(backend: &str) -> Vec<(i64, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(backend);
    let mut found: Vec<(i64, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let stem = name.strip_suffix(".sql")?;
            let version = stem.split('_').next()?.parse().ok()?;
            Some((version, std::fs::read_to_string(dir.join(&name)).unwrap()))
        })
        .collect();
    found.sort();
    found
}

#[test]
fn readiness_names_the_first_missing_migration_and_a_newer_schema() {
    let all: Vec<(i64, bool)> = SQLITE.iter().map(|m| (m.0, true)).collect();
    assert_eq!(compare(&all, SQLITE), Ok(()));
    assert_eq!(compare(&[], SQLITE), Err(NotReady::NoSchema));
    let without_last = &all[..all.len() - 1];
    let last = SQLITE.last().unwrap();
    assert_eq!(
        compare(without_last, SQLITE),
        Err(NotReady::Behind {
            version: last.0,
            description: last.1
        })
    );
    let mut newer = all.clone();
    newer.push((last.0 + 1, true));
    assert_eq!(
        compare(&newer, SQLITE),
        Err(NotReady::Ahead {
            applied: last.0 + 1,
            known: last.0
        })
    );
    let mut failed = all.clone();
    failed[1].1 = false;
    assert_eq!(
        compare(&failed, SQLITE),
        Err(NotReady::Failed { version: all[1].0 })
    );
    assert!(
        NotReady::Behind {
            version: 8,
            description: "pause and resume"
        }
        .to_string()
        .contains("migration 8 (pause and resume) is not applied")
    );
}

#[test]
fn every_migration_file_is_embedded_in_order() {
    for (backend, embedded) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
        let embedded: Vec<(i64, String)> = embedded
            .iter()
            .map(|&(v, _, sql)| (v, sql.to_string()))
            .collect();
        assert_eq!(files(backend), embedded, "{backend}");
    }
}

#[tokio::test]
async fn rebuilding_the_sqlite_jobs_table_keeps_every_event_and_the_cascade() {
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await
        .unwrap();
    let before_0008 = SQLITE.iter().position(|m| m.0 == 8).unwrap();
    run_sqlite(&pool, &SQLITE[..before_0008]).await.unwrap();
    sqlx::query(
        "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
         required_capabilities, max_attempts, next_attempt_at, created_at, updated_at) \
         VALUES ('a', 'task', 'failed', 0, '{}', 'o/r', '[]', 3, 0, 0, 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
         VALUES ('a', 'job.created', 'info', 'created', '{}', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    run_sqlite(&pool, SQLITE).await.unwrap();
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(count("SELECT count(*) FROM job_events").await, 1);
    assert_eq!(
        count("SELECT count(*) FROM jobs WHERE status = 'failed'").await,
        1
    );
    assert_eq!(
        count("SELECT count(*) FROM pragma_foreign_key_check").await,
        0
    );
    sqlx::query("UPDATE jobs SET status = 'paused'")
        .execute(&pool)
        .await
        .unwrap();
    // Foreign keys are on again: deleting the job takes its events with it.
    sqlx::query("DELETE FROM jobs")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(count("SELECT count(*) FROM job_events").await, 0);
}

/// 0013 rebuilds PostgreSQL's `jobs` with its columns in another order: every row keeps
/// every value, and an artifact still goes with its job.
#[tokio::test]
async fn rebuilding_the_postgres_jobs_table_keeps_every_value_and_the_cascade() {
    let admin = std::env::var("STEPWISE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let scratch = crate::ScratchPostgres::create(&admin, "stepwise_t_0013")
        .await
        .unwrap();
    let pool = sqlx::PgPool::connect(scratch.url()).await.unwrap();
    let before_0013 = POSTGRES.iter().position(|m| m.0 == 13).unwrap();
    migrator(&POSTGRES[..before_0013]).run(&pool).await.unwrap();
    sqlx::query(
        "INSERT INTO jobs (id, job_type, status, priority, payload, repository, \
         affinity_key, required_capabilities, created_by_user_id, attempt, max_attempts, \
         next_attempt_at, claimed_by, lease_expires_at, cancel_requested_at, \
         cancel_requested_by_user_id, cancel_reason, result_summary, error_message, \
         started_at, finished_at, created_at, updated_at, usage, pause_requested, \
         resume_from, approval, history_deleted_at, logs_compacted_at) VALUES \
         ('0190b6e2-0000-7000-8000-000000000001', 'task', 'failed', 5, '{\"a\": 1}', \
          'o/r', 'k', '[\"codex\"]', 'alice', 2, 3, now(), NULL, NULL, now(), 'bob', \
          'why', 'sum', 'err', now(), now(), now(), now(), '{\"tokens\": 1}', \
          '{\"p\": 1}', '{\"r\": 1}', '{\"g\": 1}', now(), now()), \
         ('0190b6e2-0000-7000-8000-000000000002', 'task', 'running', 0, '{}', 'o/r', \
          NULL, '[]', NULL, 1, 3, now(), 'w1', now(), NULL, NULL, NULL, NULL, NULL, \
          now(), NULL, now(), now(), NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO artifacts (id, job_id, name, size, content_type, sha256, created_at) \
         VALUES (gen_random_uuid(), '0190b6e2-0000-7000-8000-000000000001', 'a.txt', 1, \
         'text/plain', 'x', now())",
    )
    .execute(&pool)
    .await
    .unwrap();
    // Every value as text, by column name, so that the order of the columns is no part of it.
    const ROWS: &str = "SELECT to_jsonb(j)::text FROM jobs AS j ORDER BY id";
    let before: Vec<String> = sqlx::query_scalar(ROWS).fetch_all(&pool).await.unwrap();
    // Through 0013 only: a later migration may add a column, which every row then has.
    migrator(&POSTGRES[..=before_0013])
        .run(&pool)
        .await
        .unwrap();
    let after: Vec<String> = sqlx::query_scalar(ROWS).fetch_all(&pool).await.unwrap();
    assert_eq!(before, after);
    migrator(POSTGRES).run(&pool).await.unwrap();
    // 0013's 70, lowered by 0028 (room on the page for a batch's successes).
    let fillfactor: Vec<String> =
        sqlx::query_scalar("SELECT unnest(reloptions) FROM pg_class WHERE relname = 'jobs'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(fillfactor, ["fillfactor=50"]);
    sqlx::query("DELETE FROM jobs WHERE id = '0190b6e2-0000-7000-8000-000000000001'")
        .execute(&pool)
        .await
        .unwrap();
    let artifacts: i64 = sqlx::query_scalar("SELECT count(*) FROM artifacts")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(artifacts, 0, "the artifact went with its job");
    pool.close().await;
    scratch.drop_database().await.unwrap();
}
