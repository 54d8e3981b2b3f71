//! Readiness: a replica is sent traffic only while its database answers and holds exactly
//! the schema its build applies.

use queue::NotReady;

use crate::harness::Harness;

pub async fn a_migrated_queue_is_ready(h: Harness) {
    assert_eq!(h.queue.readiness().await, Ok(()));
}

pub async fn a_missing_migration_makes_the_queue_unready_and_is_named(h: Harness) {
    h.execute("DELETE FROM _sqlx_migrations WHERE version = 8")
        .await;
    assert_eq!(
        h.queue.readiness().await,
        Err(NotReady::Behind {
            version: 8,
            description: "pause and resume"
        })
    );
}

pub async fn a_schema_newer_than_the_build_makes_the_queue_unready(h: Harness) {
    h.execute(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         SELECT 9999, 'from a newer build', success, checksum, execution_time \
         FROM _sqlx_migrations WHERE version = 1",
    )
    .await;
    match h.queue.readiness().await {
        Err(NotReady::Ahead { applied: 9999, .. }) => {}
        other => panic!("expected Ahead, got {other:?}"),
    }
}

pub async fn a_database_without_the_schema_is_not_ready(h: Harness) {
    h.execute("DROP TABLE _sqlx_migrations").await;
    assert_eq!(h.queue.readiness().await, Err(NotReady::NoSchema));
}
