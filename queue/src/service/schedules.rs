//! Recurring tasks: a schedule made from its request (each field checked, its task as a job
//! request would be), read, paused, resumed and deleted; and one pass of the scheduler,
//! which queues the job of each due schedule's latest slot once.

use std::time::Duration;

use contract::api::{Overlap, Schedule};
use contract::source::JobSource;
use contract::{FieldError, JobId};
use serde_json::Value;
use uuid::Uuid;

use super::Queue;
use crate::error::{Entity, QueueError};
use crate::recurring::{Cadence, due_slots, slot_text, time_zone};
use crate::store::{Leased, Passed};

const FIELDS: &[&str] = &["name", "cron", "timezone", "task", "overlap", "catchUp"];
/// Schedules one pass leases at a time.
const AT_ONCE: i64 = 16;

fn not_found(id: &str) -> QueueError {
    QueueError::NotFound {
        entity: Entity::Schedule,
        id: id.chars().take(64).collect(),
    }
}

fn schedule_id(id: &str) -> Result<Uuid, QueueError> {
    Uuid::parse_str(id).map_err(|_| not_found(id))
}

impl Queue {
    /// Makes the schedule `raw` asks for (`ScheduleRequest`), its first slot the next after
    /// now; every problem at once, each named by its field.
    pub async fn create_schedule(
        &self,
        raw: &Value,
        created_by: Option<&str>,
    ) -> Result<Schedule, QueueError> {
        let mut errors = Vec::new();
        let Some(map) = raw.as_object() else {
            return Err(QueueError::invalid(
                "",
                "a schedule: an object with name, cron, task",
            ));
        };
        for key in map.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
            errors.push(FieldError::new(
                key.chars().take(64).collect::<String>(),
                format!(
                    "unknown field; the accepted fields are {}",
                    FIELDS.join(", ")
                ),
            ));
        }
        let text = |errors: &mut Vec<FieldError>, key: &str, required: bool| -> Option<String> {
            match map.get(key) {
                Some(Value::String(s)) if !s.contains('\0') => Some(s.trim().to_string()),
                None | Some(Value::Null) if !required => None,
                None | Some(Value::Null) => {
                    errors.push(FieldError::new(key, "required"));
                    None
                }
                Some(_) => {
                    errors.push(FieldError::new(key, "a string"));
                    None
                }
            }
        };
        let name = text(&mut errors, "name", true);
        if let Some(name) = &name
            && (name.is_empty() || name.chars().count() > 100 || name.contains(char::is_control))
        {
            errors.push(FieldError::new("name", "1 to 100 characters, on one line"));
        }
        let cron = text(&mut errors, "cron", true);
        let timezone = text(&mut errors, "timezone", false).unwrap_or_else(|| "UTC".into());
        if let Some(cron) = &cron
            && let Err(problems) = Cadence::parse(cron, &timezone)
        {
            errors.extend(problems.into_iter().map(|(f, why)| FieldError::new(f, why)));
        } else if cron.is_none()
            && let Err(why) = time_zone(&timezone)
        {
            errors.push(FieldError::new("timezone", why));
        }
        let overlap = match map.get("overlap") {
            None | Some(Value::Null) => Overlap::Skip,
            Some(Value::String(s)) => s.parse().unwrap_or_else(|_| {
                errors.push(FieldError::new("overlap", "\"skip\" or \"queue\""));
                Overlap::Skip
            }),
            Some(_) => {
                errors.push(FieldError::new("overlap", "\"skip\" or \"queue\""));
                Overlap::Skip
            }
        };
        let catch_up = match map.get("catchUp") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                errors.push(FieldError::new("catchUp", "true or false"));
                false
            }
        };
        let task = map.get("task").cloned().unwrap_or(Value::Null);
        errors.extend(self.task_problems(&task));
        if !errors.is_empty() {
            return Err(QueueError::Invalid(errors));
        }
        let (name, cron) = (name.unwrap_or_default(), cron.unwrap_or_default());
        let cadence = Cadence::parse(&cron, &timezone)
            .map_err(|_| QueueError::invalid("cron", "never comes"))?;
        let now = self.now();
        let next_at = cadence
            .next_after(now)
            .ok_or_else(|| QueueError::invalid("cron", "never comes"))?;
        let schedule = Schedule {
            id: Uuid::now_v7().to_string(),
            name,
            cron,
            timezone,
            task,
            overlap,
            catch_up,
            paused: false,
            next_at,
            last_slot: None,
            last_job_id: None,
            skipped: 0,
            created_by_user_id: created_by.map(str::to_string),
            created_at: now,
            updated_at: now,
        };
        if !self.inner.db.insert_schedule(&schedule).await? {
            return Err(QueueError::invalid(
                "name",
                "a schedule of this name exists: pick another, or delete it first",
            ));
        }
        Ok(schedule)
    }

    /// What is wrong with `task` as the job request of every slot, under `task.`.
    fn task_problems(&self, task: &Value) -> Vec<FieldError> {
        if !task.is_object() {
            return vec![FieldError::new(
                "task",
                "required: a job request, as POST /api/queue/jobs takes it",
            )];
        }
        if task.pointer("/payload/source").is_some() {
            return vec![FieldError::new(
                "task.payload.source",
                "set by the scheduler: leave it out",
            )];
        }
        match (
            contract::normalize(task, &self.inner.config.defaults),
            contract::not_before(task, self.now()),
        ) {
            (Ok(_), Ok(None)) => Vec::new(),
            (Ok(_), Ok(Some(_))) => vec![FieldError::new(
                "task.notBefore",
                "a schedule says when: leave it out",
            )],
            (task, not_before) => {
                let mut errors = task.err().unwrap_or_default();
                errors.extend(not_before.err());
                errors
                    .into_iter()
                    .map(|e| FieldError::new(format!("task.{}", e.path), e.message))
                    .collect()
            }
        }
    }

    pub async fn list_schedules(&self) -> Result<Vec<Schedule>, QueueError> {
        Ok(self.inner.db.list_schedules().await?)
    }

    pub async fn get_schedule(&self, id: &str) -> Result<Schedule, QueueError> {
        self.inner
            .db
            .get_schedule(schedule_id(id)?)
            .await?
            .ok_or_else(|| not_found(id))
    }

    /// Pauses schedule `id`: no slot makes a job until it is resumed.
    pub async fn pause_schedule(&self, id: &str) -> Result<Schedule, QueueError> {
        let uuid = schedule_id(id)?;
        if !self
            .inner
            .db
            .set_schedule_paused(uuid, true, None, self.now())
            .await?
        {
            return Err(not_found(id));
        }
        self.get_schedule(id).await
    }

    /// Resumes schedule `id` from its next slot after now: the slots it was paused through
    /// are not run.
    pub async fn resume_schedule(&self, id: &str) -> Result<Schedule, QueueError> {
        let schedule = self.get_schedule(id).await?;
        let now = self.now();
        let next = Cadence::parse(&schedule.cron, &schedule.timezone)
            .ok()
            .and_then(|c| c.next_after(now))
            .ok_or_else(|| QueueError::invalid("cron", "never comes again"))?;
        self.inner
            .db
            .set_schedule_paused(schedule_id(id)?, false, Some(next), now)
            .await?;
        self.get_schedule(id).await
    }

    /// Deletes schedule `id`; the jobs it made stay.
    pub async fn delete_schedule(&self, id: &str) -> Result<(), QueueError> {
        if !self.inner.db.delete_schedule(schedule_id(id)?).await? {
            return Err(not_found(id));
        }
        Ok(())
    }

    /// One pass of the scheduler as `owner`: every due schedule's latest due slot queues
    /// its job (once, however many replicas pass), unless it was missed (later than
    /// `grace`) and the schedule does not catch up, or its previous job is still going
    /// and the schedule skips overlaps. How many jobs it queued.
    pub async fn run_schedules(
        &self,
        owner: &str,
        lease: Duration,
        grace: Duration,
    ) -> Result<usize, QueueError> {
        let mut made = 0;
        loop {
            let now = self.now();
            let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
            let due = self
                .inner
                .db
                .claim_schedules(owner, now, until, AT_ONCE)
                .await?;
            if due.is_empty() {
                return Ok(made);
            }
            for leased in due {
                let passed = self.pass_schedule(&leased, grace).await;
                made += usize::from(passed.job.is_some());
                self.inner
                    .db
                    .settle_schedule(&leased, owner, &passed, self.now())
                    .await?;
            }
        }
    }

    async fn pass_schedule(&self, leased: &Leased, grace: Duration) -> Passed {
        let schedule = &leased.schedule;
        let now = self.now();
        let Ok(cadence) = Cadence::parse(&schedule.cron, &schedule.timezone) else {
            // Checked when made; a time zone the build no longer knows ends it.
            return Passed {
                next_at: now,
                last_slot: schedule.next_at,
                job: None,
                skipped: 1,
                ended: true,
            };
        };
        let (slot, count, next) = due_slots(&cadence, schedule.next_at, now);
        let late = (now - slot).to_std().unwrap_or_default() > grace;
        let mut run = !late || schedule.catch_up;
        if run && schedule.overlap == Overlap::Skip && self.still_going(schedule.last_job_id).await
        {
            run = false;
        }
        let mut job = None;
        if run {
            let source = JobSource::Schedule {
                schedule: schedule.id.clone(),
                name: schedule.name.clone(),
                slot: slot_text(slot),
            };
            match self
                .create_sourced_job(
                    &schedule.task,
                    schedule.created_by_user_id.as_deref(),
                    &source,
                )
                .await
            {
                Ok((made, _)) => job = Some(made.id),
                Err(error) => {
                    tracing::warn!(%error, schedule = %schedule.name, "a schedule's slot could not queue its job");
                }
            }
        }
        Passed {
            next_at: next.unwrap_or(now),
            last_slot: slot,
            skipped: count - u64::from(job.is_some()),
            job,
            ended: next.is_none(),
        }
    }

    /// Job `id` is queued, running, paused or waiting for approval.
    async fn still_going(&self, id: Option<JobId>) -> bool {
        let Some(id) = id else {
            return false;
        };
        match self.get_job(&id).await {
            Ok(job) => !job.status.has_ended(),
            Err(_) => false,
        }
    }
}
