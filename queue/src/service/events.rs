//! A job's timeline: workers append their events under their lease; pages and streams
//! read them back.

use std::collections::HashMap;

use contract::job::{events, task};
use contract::timeline::{Checkpoint, Timeline};
use contract::{JobEvent, JobId, NewEvent, limits};

use super::Queue;
use crate::error::QueueError;
use crate::lease::Fence;
use crate::machine::{self, Outcome, PendingEvent};
use crate::notify::NotificationKind;
use crate::store::{EventOrder, EventPage};

const EVENT_KIND_CHARS: usize = 100;
const MAX_EVENTS_PAGE: u32 = 1000;
/// How many of a job's events that tell progress are read for its checkpoints, at most.
const MILESTONES_READ: usize = 20_000;

impl Queue {
    /// A worker's event (`task.step.started`, ...) on the job it holds. Kinds starting with
    /// `job.` are the queue's own and refused, so the timeline's `job.*` entries always
    /// record what the queue did.
    ///
    /// A step's end (`task.step.finished`, `task.step.failed`) that carries `usage` adds it
    /// to the job's `usage` in the same transaction, so the totals always match the
    /// timeline; a `usage` that is not a [`contract::StepUsage`] is refused by name.
    pub async fn append_event(
        &self,
        id: &JobId,
        fence: &Fence,
        event: NewEvent,
    ) -> Result<JobEvent, QueueError> {
        validate_event(&event)?;
        let usage = contract::events::reported_usage(&event.kind, &event.payload)
            .map_err(|e| QueueError::Invalid(vec![e]))?;
        contract::events::checked_loop_event(&event.kind, &event.payload)
            .map_err(|e| QueueError::Invalid(vec![e]))?;
        let mut payload = serde_json::Value::Object(event.payload);
        contract::text::replace_nul_in_json(&mut payload);
        let serde_json::Value::Object(payload) = payload else {
            unreachable!("an object stays an object")
        };
        let event = NewEvent {
            message: contract::text::replace_nul(&event.message).into_owned(),
            payload,
            ..event
        };
        let now = self.now();
        let (mut tx, mut job) = self.lock_fenced(id, fence).await?;
        let pending = PendingEvent {
            kind: event.kind,
            level: event.level,
            message: event.message,
            payload: event.payload,
        };
        let appended = tx.insert_event(&job.id, &pending, now).await?;
        let mut budget = Outcome::Unchanged;
        if let Some(usage) = usage {
            // Every attempt's steps count: a retried step was paid for twice.
            let total = job.usage.unwrap_or_default() + usage;
            tx.set_usage(&job.id, &total).await?;
            job.usage = Some(total);
            budget = machine::pause_for_budget(&mut job, now);
        }
        // Step ends are progress kinds, so lists learn of new totals from this one.
        if contract::job::task::is_progress(&appended.kind) {
            tx.notify(&job.id, NotificationKind::StepProgress);
        }
        // A budget reached asks for the pause in the same transaction, so the worker that
        // reported the usage finds the request when it stops.
        match budget {
            Outcome::Unchanged => self.commit(tx).await?,
            budget => self.write_outcome(tx, &job, budget, now).await?,
        }
        self.observe(&job, [(appended.kind.as_str(), &appended.payload)]);
        if let (Some(recent), Some(_)) = (&self.inner.last_written, usage) {
            // So the job a later transition answers from its remembered row has the
            // totals too (the row lock made this read the newest).
            recent.remember([&job]);
        }
        Ok(appended)
    }

    /// Records what became of a notification of the job's end (the server's webhooks):
    /// `job.notification_delivered`, or `job.notification_failed` with its reason. Needs no
    /// lease: the server writes it, on a job that has ended or waits for approval.
    pub async fn record_notification(
        &self,
        id: &JobId,
        delivered: bool,
        message: String,
        payload: serde_json::Map<String, serde_json::Value>,
    ) -> Result<JobEvent, QueueError> {
        let (kind, level) = if delivered {
            (
                events::JOB_NOTIFICATION_DELIVERED,
                contract::EventLevel::Info,
            )
        } else {
            (events::JOB_NOTIFICATION_FAILED, contract::EventLevel::Warn)
        };
        let now = self.now();
        let (mut tx, job) = self.lock(id).await?;
        let pending = PendingEvent {
            kind: kind.to_string(),
            level,
            message: contract::text::replace_nul(&message).into_owned(),
            payload,
        };
        let appended = tx.insert_event(id, &pending, now).await?;
        self.commit(tx).await?;
        // The metrics count deliveries by outcome.
        self.observe(&job, [(appended.kind.as_str(), &appended.payload)]);
        Ok(appended)
    }

    /// The job's events with ids above `after` (0 for all), oldest first, at most `limit`
    /// (1 to 1000).
    pub async fn list_events(
        &self,
        id: &JobId,
        after: i64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let page = EventPage {
            after,
            except: None,
            order: EventOrder::Oldest,
            limit: page_limit(limit),
        };
        self.events_of(id, &page).await
    }

    /// The newest `limit` (1 to 1000) events of the job, oldest first: the end of a long
    /// timeline, for a page that shows the latest activity.
    pub async fn list_latest_events(
        &self,
        id: &JobId,
        limit: u32,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let page = EventPage {
            after: 0,
            except: None,
            order: EventOrder::Newest,
            limit: page_limit(limit),
        };
        let mut events = self.events_of(id, &page).await?;
        events.reverse();
        Ok(events)
    }

    /// [`list_events`](Self::list_events) leaving out the events of kind `except` (a
    /// step's log lines, say, which outnumber every other kind by far).
    pub async fn list_events_except(
        &self,
        id: &JobId,
        except: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let page = EventPage {
            after,
            except: Some(except),
            order: EventOrder::Oldest,
            limit: page_limit(limit),
        };
        self.events_of(id, &page).await
    }

    /// The checkpoints the job's worker saved, oldest first: its timeline's, folded from
    /// the events that tell progress (log lines left out), up to [`MILESTONES_READ`].
    pub async fn list_checkpoints(&self, id: &JobId) -> Result<Vec<Checkpoint>, QueueError> {
        Ok(self.timeline(id, 0).await?.checkpoints)
    }

    /// The job's timeline for a task of `step_count` steps, folded from the events that
    /// tell progress (log lines left out), up to [`MILESTONES_READ`].
    pub(crate) async fn timeline(
        &self,
        id: &JobId,
        step_count: usize,
    ) -> Result<Timeline, QueueError> {
        let mut timeline = Timeline::from_events(step_count, []);
        let mut after = 0;
        let mut read = 0;
        loop {
            let page = self
                .list_events_except(id, task::STEP_LOG, after, MAX_EVENTS_PAGE)
                .await?;
            read += page.len();
            for event in &page {
                timeline.apply(event);
            }
            match page.last() {
                Some(last) if page.len() == MAX_EVENTS_PAGE as usize && read < MILESTONES_READ => {
                    after = last.id;
                }
                _ => return Ok(timeline),
            }
        }
    }

    /// One page of the job's events; an empty page is a 404 when the job does not exist,
    /// which costs a second query only then.
    async fn events_of(
        &self,
        id: &JobId,
        page: &EventPage<'_>,
    ) -> Result<Vec<JobEvent>, QueueError> {
        let events = self.inner.db.list_events(id.uuid(), page).await?;
        if events.is_empty() && self.inner.db.get_job(id.uuid()).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        Ok(events)
    }

    /// How many events the job has.
    pub async fn count_events(&self, id: &JobId) -> Result<u64, QueueError> {
        let n = self.inner.db.count_events(id.uuid()).await?;
        if n == 0 && self.inner.db.get_job(id.uuid()).await?.is_none() {
            return Err(QueueError::job_not_found(id));
        }
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// How many steps each task has finished in its current attempt (`task.step.finished`
    /// events since its latest claim), for a list of jobs; a job with none is left out.
    /// Unknown ids are ignored.
    pub async fn steps_finished(&self, ids: &[JobId]) -> Result<HashMap<JobId, u32>, QueueError> {
        let uuids: Vec<_> = ids.iter().map(JobId::uuid).collect();
        let counts = self
            .inner
            .db
            .count_since_claim(&uuids, contract::job::task::STEP_FINISHED)
            .await?;
        Ok(counts
            .into_iter()
            .map(|(id, n)| (id.into(), u32::try_from(n).unwrap_or(u32::MAX)))
            .collect())
    }
}

fn page_limit(limit: u32) -> i64 {
    i64::from(limit.clamp(1, MAX_EVENTS_PAGE))
}

fn validate_event(event: &NewEvent) -> Result<(), QueueError> {
    let kind = &event.kind;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':');
    if kind.is_empty() || kind.chars().count() > EVENT_KIND_CHARS || !kind.chars().all(allowed) {
        return Err(QueueError::invalid(
            "kind",
            format!("must be 1 to {EVENT_KIND_CHARS} of a-z, A-Z, 0-9, '.', '_', '-', ':'"),
        ));
    }
    if kind.starts_with(events::RESERVED_PREFIX) {
        return Err(QueueError::invalid(
            "kind",
            format!(
                "`{}` kinds are reserved for the queue",
                events::RESERVED_PREFIX
            ),
        ));
    }
    if event.message.len() > limits::EVENT_MESSAGE_BYTES {
        return Err(QueueError::TooLarge {
            what: "event message",
            size: event.message.len() as u64,
            limit: limits::EVENT_MESSAGE_BYTES as u64,
        });
    }
    let payload_size = serde_json::to_vec(&event.payload)
        .map(|bytes| bytes.len() as u64)
        .unwrap_or(u64::MAX);
    if payload_size > limits::EVENT_PAYLOAD_BYTES as u64 {
        return Err(QueueError::TooLarge {
            what: "event payload",
            size: payload_size,
            limit: limits::EVENT_PAYLOAD_BYTES as u64,
        });
    }
    Ok(())
}
