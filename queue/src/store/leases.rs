//! The one way a background service's rows are leased (the webhook outbox, the pull
//! request watches, the issue replies, the schedules): the rows due now and leased to no
//! one, or whose lease ran out, are taken for an owner until a time, each one's attempt
//! going up by one, which fences whatever the owner writes back. A leaf.

use super::Database;

/// The statement that leases up to `$4` rows of `table` (keyed by `key`) that match `due`
/// (a condition, or empty) with `next_at <= $3` and no live lease, to `$1` until `$2`, in
/// `order`, answering `returning`. PostgreSQL's pick skips rows another replica is taking;
/// SQLite has one writer at a time, so its pick needs no row locks.
pub(super) fn lease_due_sql(
    db: &Database,
    table: &str,
    key: &str,
    due: &str,
    order: &str,
    returning: &str,
) -> String {
    let lock = match db {
        Database::Sqlite(_) => "",
        Database::Postgres(_) => " FOR UPDATE SKIP LOCKED",
    };
    let due = if due.is_empty() {
        String::new()
    } else {
        format!("{due} AND ")
    };
    format!(
        "UPDATE {table} SET attempt = attempt + 1, lease_owner = $1, lease_until = $2 \
         WHERE {key} IN (SELECT {key} FROM {table} WHERE {due}next_at <= $3 \
         AND (lease_until IS NULL OR lease_until <= $3) ORDER BY {order} LIMIT $4{lock}) \
         {returning}"
    )
}
