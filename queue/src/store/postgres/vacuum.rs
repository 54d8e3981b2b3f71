//! The live table's own vacuum (`crate::Vacuum` decides when). A claim walks the claim
//! order's index from its first entry, and every job claimed since the table was last
//! vacuumed left a dead entry there, ahead of every queued one: the walk grows with the
//! work done since, and autovacuum looks at a table once a minute at best.

use sqlx::{PgPool, Row};

/// How much of the live table is dead, and whether this database user may vacuum it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LiveDead {
    /// Dead row versions, as the server's statistics count them.
    pub dead: i64,
    /// Whether this user owns the table or the database (or is a superuser): who may
    /// vacuum a table up to PostgreSQL 16 (17 also lets a `MAINTAIN` grant, not read here).
    pub owned: bool,
}

/// One replica's vacuum at a time (an advisory lock held for the vacuum): a second one
/// would skip the table with a warning in the server's log, every second.
const VACUUM_LOCK: i64 = 0x5354_4550_5641_4355; // "STEPVACU"

/// How much of the live table is dead, by the server's statistics (each process reports
/// its writes within a second while it is busy, within ten once it goes idle; a vacuum's
/// at once), and whether this user may vacuum it.
pub(crate) async fn live_dead(pool: &PgPool) -> Result<LiveDead, sqlx::Error> {
    let row = sqlx::query(
        "SELECT coalesce(s.n_dead_tup, 0) AS dead, \
           pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE') AS owned \
         FROM pg_class AS c LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid, \
           pg_database AS d \
         WHERE c.oid = 'job_queue'::regclass AND d.datname = current_database()",
    )
    .fetch_one(pool)
    .await?;
    Ok(LiveDead {
        dead: row.try_get("dead")?,
        owned: row.try_get("owned")?,
    })
}

/// Vacuums the live table unless another replica is vacuuming it; whether it did. Its
/// dead row versions and their index entries go, the indexes' always: with few dead rows
/// among many queued ones PostgreSQL would skip the indexes, and their dead entries are
/// what the claim walks. `SKIP_LOCKED`: autovacuum at work on it is as good.
/// `TRUNCATE OFF`: giving back empty pages at the table's end takes a lock that would
/// hold up every claim, and the next jobs fill them again.
pub(crate) async fn vacuum_live(pool: &PgPool) -> Result<bool, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let ours: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(VACUUM_LOCK)
        .fetch_one(&mut *conn)
        .await?;
    if !ours {
        return Ok(false);
    }
    let vacuumed = sqlx::query("VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON, TRUNCATE OFF) job_queue")
        .persistent(false)
        .execute(&mut *conn)
        .await;
    let released = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(VACUUM_LOCK)
        .execute(&mut *conn)
        .await;
    if released.is_err() {
        // A lock held by a connection gone back to the pool would keep every other
        // replica from vacuuming: closed, the connection takes the lock with it.
        drop(conn.detach());
    }
    vacuumed?;
    released?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pages the claim's pick reads to find the first queued job.
    async fn pages_to_the_first_queued(pool: &PgPool) -> i64 {
        let plan: sqlx::types::Json<serde_json::Value> = sqlx::query_scalar(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT id FROM job_queue \
             WHERE status = 'queued' ORDER BY priority DESC, created_at, id LIMIT 1",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        let node = &plan.0[0]["Plan"];
        assert!(node.to_string().contains("job_queue_claim_order"), "{node}");
        node["Shared Hit Blocks"].as_i64().unwrap() + node["Shared Read Blocks"].as_i64().unwrap()
    }

    #[tokio::test]
    async fn a_vacuum_takes_the_claimed_jobs_entries_off_the_claims_walk() {
        let (scratch, _db, pool) = super::super::scratch("stepwise_t_vacuum").await;
        super::super::queued_jobs(&pool, 6000).await;
        sqlx::raw_sql("VACUUM ANALYZE job_queue")
            .execute(&pool)
            .await
            .unwrap();
        let fresh = pages_to_the_first_queued(&pool).await;
        // The first 5,000 in claim order claimed, then ended, as claims and successes
        // write them: the claim order's entries of all 5,000 stay behind.
        sqlx::raw_sql(
            "UPDATE job_queue SET status = 'running', claimed_by = 'w', \
               lease_expires_at = now() + interval '5 minutes' \
             WHERE id IN (SELECT id FROM job_queue ORDER BY priority DESC, created_at, id \
               LIMIT 5000); \
             DELETE FROM job_queue WHERE status = 'running'; \
             SELECT pg_stat_force_next_flush()",
        )
        .execute(&pool)
        .await
        .unwrap();
        let walked = pages_to_the_first_queued(&pool).await;
        assert!(
            walked > fresh + 20,
            "{fresh} pages fresh, {walked} after the claims"
        );
        let before = live_dead(&pool).await.unwrap();
        assert!(
            before.owned,
            "the scratch database's tables are this user's"
        );
        assert!(before.dead >= 5000, "{before:?}");
        // Another replica's vacuum under way: this one leaves the table to it.
        let mut other = pool.acquire().await.unwrap();
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(VACUUM_LOCK)
            .execute(&mut *other)
            .await
            .unwrap();
        assert!(!vacuum_live(&pool).await.unwrap());
        assert!(pages_to_the_first_queued(&pool).await > fresh + 20);
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(VACUUM_LOCK)
            .execute(&mut *other)
            .await
            .unwrap();
        drop(other);
        assert!(vacuum_live(&pool).await.unwrap());
        let after = live_dead(&pool).await.unwrap();
        assert!(after.dead < 100, "{before:?} before, {after:?} after");
        let vacuumed = pages_to_the_first_queued(&pool).await;
        assert!(
            vacuumed <= fresh + 2,
            "{fresh} pages fresh, {walked} after the claims, {vacuumed} vacuumed"
        );
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM job_queue")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(left, 1000);
        pool.close().await;
        scratch.drop_database().await.unwrap();
    }

    #[tokio::test]
    async fn another_role_than_the_tables_owner_may_not_vacuum_the_live_table() {
        let (scratch, _db, pool) = super::super::scratch("stepwise_t_vacuum_owner").await;
        let role = format!("stepwise_t_not_owner_{}", uuid::Uuid::now_v7().simple());
        sqlx::raw_sql(&format!("CREATE ROLE {role}"))
            .execute(&pool)
            .await
            .unwrap();
        // One connection, which keeps the role it was given for the pool's every use.
        let as_other = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(scratch.url())
            .await
            .unwrap();
        sqlx::raw_sql(&format!("SET ROLE {role}"))
            .execute(&mut *as_other.acquire().await.unwrap())
            .await
            .unwrap();
        assert!(live_dead(&pool).await.unwrap().owned);
        assert!(!live_dead(&as_other).await.unwrap().owned);
        as_other.close().await;
        sqlx::raw_sql(&format!("DROP ROLE {role}"))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        scratch.drop_database().await.unwrap();
    }
}
