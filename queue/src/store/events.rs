//! A job's timeline: events appended in a job's id order, read back by page.

use chrono::{DateTime, Utc};
use contract::{JobEvent, JobId, StepUsage};
use sqlx::Row;
use uuid::Uuid;

use super::postgres;
use super::sqlite::RowExt;
use super::{Arg, Id, Tx, TxConn, pg_rows, sqlite_rows};
use crate::QueueError;
use crate::machine::PendingEvent;
use crate::notify::NotificationKind;
use crate::store::Database;
use crate::store::kept;
use contract::job::events::{JOB_CLAIMED, JOB_COMPLETED};

/// Reads of a page before events that keep moving out of the job's row are given up on:
/// each moves once in its life, so a second read finds it a row.
const READS: usize = 3;

const INSERT_EVENT: &str = "INSERT INTO job_events (job_id, kind, level, message, payload, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";

/// Only [`Tx::set_usage`] writes the column; see migration 0007 for why transitions don't.
const SET_USAGE: &str = "UPDATE jobs SET usage = $2 WHERE id = $1";

const LAST_EVENT: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM job_events WHERE job_id = $1 AND kind = $2 ORDER BY id DESC LIMIT 1"
);

/// Which of a job's events a read wants: those after a cursor, but for one kind, from
/// either end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventPage<'a> {
    /// Only events with ids above this (0 for all).
    pub after: i64,
    /// Leaves out the events of this kind.
    pub except: Option<&'a str>,
    pub order: EventOrder,
    pub limit: i64,
}

/// Which end of the timeline a read starts from; either way the page comes back in that
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventOrder {
    Oldest,
    Newest,
}

impl Tx {
    /// Appends an event and queues its notification.
    ///
    /// Event ids are the cursor of a job's event stream, so within one job they must become
    /// visible in id order: a reader that has seen id N of a job must never later find a
    /// smaller id of that job appear. Every caller holds the job's row lock (or inserts the
    /// job's first event with the row itself, invisible until commit), so two transactions
    /// of one job insert and commit one after the other, and the second draws its id after
    /// the first committed. Across jobs ids may commit out of order (PostgreSQL hands out
    /// sequence values at insert time); no reader pages events across jobs by id, and one
    /// that ever must needs a visibility watermark rather than a global lock, which would
    /// serialize every write of the cluster.
    pub(crate) async fn insert_event(
        &mut self,
        job_id: &JobId,
        event: &PendingEvent,
        now: DateTime<Utc>,
    ) -> Result<JobEvent, QueueError> {
        let args = [
            Arg::Id(job_id.uuid()),
            Arg::text(&event.kind),
            Arg::text(event.level.as_str()),
            Arg::text(&event.message),
            Arg::json(&event.payload)?,
            Arg::at(now),
        ];
        let ids: Vec<i64> = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, INSERT_EVENT, &args, |r| r.try_get("id"))?,
            TxConn::Postgres(t) => pg_rows(t, INSERT_EVENT, &args, |r| r.try_get("id")).await?,
        };
        let event_id = ids.into_iter().next().ok_or(sqlx::Error::RowNotFound)?;
        self.notify(job_id, NotificationKind::EventAppended { event_id });
        Ok(event.stored(job_id, event_id, now))
    }

    /// Replaces the job's usage totals. The caller holds the row lock and computed `usage`
    /// from the row it locked, so no other addition can fall between its read and this
    /// write. `updated_at` stays: it marks state changes, which transitions compare.
    pub(crate) async fn set_usage(
        &mut self,
        job_id: &JobId,
        usage: &StepUsage,
    ) -> Result<(), QueueError> {
        let args = [Arg::Id(job_id.uuid()), Arg::json(usage)?];
        self.execute(SET_USAGE, &args).await
    }

    pub(crate) async fn last_event(
        &mut self,
        job_id: Uuid,
        kind: &str,
    ) -> Result<Option<JobEvent>, QueueError> {
        let args = [Arg::Id(job_id), Arg::text(kind)];
        let events = match &mut self.conn {
            TxConn::Sqlite(t) => sqlite_rows(t, LAST_EVENT, &args, |r| event_from_row!(r))?,
            TxConn::Postgres(t) => pg_rows(t, LAST_EVENT, &args, |r| event_from_row!(r)).await?,
        };
        Ok(events.into_iter().next())
    }

    /// [`insert_event`](Self::insert_event) for several events, appended in the order given;
    /// one statement on PostgreSQL.
    pub(crate) async fn insert_events(
        &mut self,
        events: &[(JobId, &PendingEvent)],
        now: DateTime<Utc>,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let TxConn::Postgres(t) = &mut self.conn else {
            let mut appended = Vec::with_capacity(events.len());
            for (job_id, event) in events {
                appended.push(self.insert_event(job_id, event, now).await?);
            }
            return Ok(appended);
        };
        let ids = postgres::insert_events(t, events, now).await?;
        let appended: Vec<JobEvent> = events
            .iter()
            .zip(ids)
            .map(|((job_id, event), id)| event.stored(job_id, id, now))
            .collect();
        for event in &appended {
            self.notify(
                &event.job_id,
                NotificationKind::EventAppended { event_id: event.id },
            );
        }
        Ok(appended)
    }
}

impl Database {
    /// The job's events that `page` asks for: its event rows and the events its row keeps
    /// (`kept.rs`), in one ordered page. Those are built from the job as it is; should the
    /// row have written them out meanwhile, the page is read again, and finds them rows.
    pub(crate) async fn list_events(
        &self,
        job_id: Uuid,
        page: &EventPage<'_>,
    ) -> Result<Vec<JobEvent>, sqlx::Error> {
        for _ in 0..READS {
            let read = self.list_event_rows(job_id, page).await?;
            if read.iter().all(|(_, kept)| !kept) {
                return Ok(read.into_iter().map(|(event, _)| event).collect());
            }
            let Some((job, kept)) = self.kept_job(job_id).await? else {
                continue;
            };
            // Each mark must still be kept, under its id; a row must not be.
            let built = kept::rebuilt(&job, &kept);
            let events: Option<Vec<JobEvent>> = read
                .into_iter()
                .map(
                    |(event, is_kept)| match built.iter().find(|b| b.id == event.id) {
                        Some(b) if is_kept => Some(b.clone()),
                        None if !is_kept => Some(event),
                        _ => None,
                    },
                )
                .collect();
            if let Some(events) = events {
                return Ok(events);
            }
        }
        Err(sqlx::Error::Protocol(format!(
            "job {job_id}'s kept events moved {READS} times while its timeline was read"
        )))
    }

    /// The page's rows: each event, and whether it is only a mark of an event the job's
    /// row keeps (its id, kind and time, the rest for the caller to build).
    async fn list_event_rows(
        &self,
        job_id: Uuid,
        page: &EventPage<'_>,
    ) -> Result<Vec<(JobEvent, bool)>, sqlx::Error> {
        // Each branch is limited on its own: over a whole union the planners would sort
        // every event of the job before the limit, where the rows' branch alone walks its
        // index from the cursor and stops.
        let order = match page.order {
            EventOrder::Oldest => " ORDER BY id LIMIT ",
            EventOrder::Newest => " ORDER BY id DESC LIMIT ",
        };
        on_pool!(self, p => {
            let mut query = sqlx::QueryBuilder::new(concat!(
                "SELECT * FROM (SELECT ",
                event_columns!(),
                ", 0 AS kept FROM job_events WHERE job_id = "
            ));
            query.push_bind(Id(job_id));
            if page.after > 0 {
                query.push(" AND id > ").push_bind(page.after);
            }
            if let Some(kind) = page.except {
                query.push(" AND kind <> ").push_bind(kind);
            }
            query.push(order).push_bind(page.limit);
            query.push(") AS event_rows");
            // The claim is in the live row while the job has one (`live.rs`).
            let kept = [
                (JOB_CLAIMED, live!("claimed_event_id"), live!("claimed_at")),
                (JOB_COMPLETED, "j.completed_event_id", "j.finished_at"),
            ];
            for (kind, id, at) in kept {
                query
                    .push(format_args!(" UNION ALL SELECT {id} AS id, j.id AS job_id, "))
                    .push_bind(kind)
                    .push(format_args!(
                        " AS kind, 'info' AS level, '' AS message, '{{}}' AS payload, \
                         {at} AS created_at, 1 AS kept FROM {} WHERE j.id = ",
                        job_from!()
                    ))
                    .push_bind(Id(job_id))
                    .push(format_args!(" AND {id} > "))
                    .push_bind(page.after);
                if let Some(except) = page.except {
                    query.push(" AND ").push_bind(kind).push(" <> ").push_bind(except);
                }
            }
            query.push(order).push_bind(page.limit);
            let rows = query.build().fetch_all(p).await?;
            rows.iter()
                .map(|row| Ok((event_from_row!(row)?, row.try_get::<i32, _>("kept")? == 1)))
                .collect()
        })
    }

    /// Its event rows and the events its row keeps.
    pub(crate) async fn count_events(&self, job_id: Uuid) -> Result<i64, sqlx::Error> {
        on_pool!(self, p => {
            sqlx::query_scalar(
                concat!(
                    "SELECT (SELECT COUNT(*) FROM job_events WHERE job_id = $1) \
                     + (SELECT COUNT(",
                    live!("claimed_event_id"),
                    ") + COUNT(j.completed_event_id) FROM ",
                    job_from!(),
                    " WHERE j.id = $1)"
                ),
            )
            .bind(Id(job_id))
            .fetch_one(p)
            .await
        })
    }

    /// For each of `job_ids` that has any, how many events of `kind` it has since its
    /// latest claim (or since it was created, when it has none): the claim its row keeps,
    /// which is always its latest (`kept.rs`), or else its newest `job.claimed` row.
    pub(crate) async fn count_since_claim(
        &self,
        job_ids: &[Uuid],
        kind: &str,
    ) -> Result<Vec<(Uuid, i64)>, sqlx::Error> {
        if job_ids.is_empty() {
            return Ok(Vec::new());
        }
        on_pool!(self, p => {
            let mut query = sqlx::QueryBuilder::new(
                "SELECT e.job_id AS job_id, COUNT(*) AS n FROM job_events e WHERE e.kind = ",
            );
            query
                .push_bind(kind)
                .push(
                    concat!(
                        " AND e.id > COALESCE((SELECT ",
                        live!("claimed_event_id"),
                        " FROM ",
                        job_from!(),
                        " WHERE j.id = e.job_id), \
                         (SELECT MAX(s.id) FROM job_events s WHERE s.job_id = e.job_id \
                          AND s.kind = "
                    ),
                )
                .push_bind(JOB_CLAIMED)
                .push("), 0) AND e.job_id IN (");
            let mut ids = query.separated(", ");
            for id in job_ids {
                ids.push_bind(Id(*id));
            }
            query.push(") GROUP BY e.job_id");
            let rows = query.build().fetch_all(p).await?;
            rows.iter()
                .map(|row| Ok((row.try_get::<Id, _>("job_id")?.0, row.try_get::<i64, _>("n")?)))
                .collect()
        })
    }
}
