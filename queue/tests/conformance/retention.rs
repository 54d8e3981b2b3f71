//! Retention: finished jobs' log lines, events, artifacts and (when asked) rows are
//! deleted once they are old enough, a batch at a time; nothing else is touched.

use std::time::Duration;

use contract::events::{HistoryDeleted, StepLog, TaskEvent};
use contract::job::{events, task};
use contract::{Job, JobState, NewEvent};
use queue::{Retention, RetentionConfig, RetentionReport};

use crate::harness::*;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn retention(h: &Harness, batch_size: u32) -> Retention {
    Retention::new(
        h.queue.clone(),
        RetentionConfig {
            batch_size,
            ..RetentionConfig::default()
        },
    )
}

fn log_line(step: usize, n: usize) -> NewEvent {
    NewEvent {
        kind: task::STEP_LOG.into(),
        message: format!("step {step} line {n}"),
        payload: StepLog { step_index: step }.payload(),
        ..NewEvent::default()
    }
}

/// A job that ran: `lines` log lines for each of steps 0 and 1, two milestones, the
/// given artifacts, then its end (`succeed` or a failure that is not retried).
async fn ran(h: &Harness, lines: usize, artifacts: &[String], succeed: bool) -> Job {
    let job = h.create(Spec::default()).await;
    run(h, &job, lines, artifacts, succeed).await
}

/// [`ran`] of a job made earlier.
async fn run(h: &Harness, job: &Job, lines: usize, artifacts: &[String], succeed: bool) -> Job {
    let claimed = h.claim_exactly("w1", job).await;
    let f = fence(&claimed);
    for step in 0..2 {
        h.queue
            .append_event(&job.id, &f, step_event(task::STEP_STARTED))
            .await
            .unwrap();
        for n in 0..lines {
            h.queue
                .append_event(&job.id, &f, log_line(step, n))
                .await
                .unwrap();
        }
    }
    for name in artifacts {
        h.queue
            .add_artifact(&job.id, &f, name, "text/plain", b"the whole log\n")
            .await
            .unwrap();
    }
    if succeed {
        h.queue.complete(&job.id, &f, None).await.unwrap()
    } else {
        h.queue
            .fail(&job.id, &f, "it broke".into(), false)
            .await
            .unwrap()
    }
}

async fn log_steps(h: &Harness, job: &Job) -> Vec<usize> {
    let events = h.queue.list_events(&job.id, 0, 1000).await.unwrap();
    events
        .iter()
        .filter(|e| e.kind == task::STEP_LOG)
        .map(|e| StepLog::read(e).unwrap().step_index)
        .collect()
}

pub async fn a_finished_job_keeps_its_history_for_thirty_days_then_only_its_row_and_one_event(
    h: Harness,
) {
    let names: Vec<String> = (0..9).map(|i| format!("out/file-{i}.txt")).collect();
    let job = ran(&h, 10, &names, true).await;
    let kept = h.event_kinds(&job).await.len();
    let artifact = h.queue.list_artifacts(&job.id).await.unwrap().remove(0);
    // Log lines are not compacted here: no step's log is stored.
    h.advance(30 * DAY);
    let report = retention(&h, 4).run_once().await.unwrap();
    assert!(report.is_empty(), "{report:?}");
    assert_eq!(h.event_kinds(&job).await.len(), kept);

    h.advance(Duration::from_millis(1));
    // Batches of 4 rows: 9 artifacts and 27 events take many statements.
    let report = retention(&h, 4).run_once().await.unwrap();
    assert_eq!(report.history_deleted, [job.id]);
    assert_eq!(report.artifacts, 9);
    assert_eq!(report.events as usize, kept);
    assert_eq!(h.event_kinds(&job).await, [events::JOB_HISTORY_DELETED]);
    let event = h.queue.list_events(&job.id, 0, 10).await.unwrap().remove(0);
    let payload: HistoryDeleted = contract::events::read_payload(&event.payload).unwrap();
    assert_eq!(payload.finished_at, job.finished_at.unwrap());
    assert_eq!((payload.events as usize, payload.artifacts), (kept, 9));
    assert!(h.queue.list_artifacts(&job.id).await.unwrap().is_empty());
    assert_code(
        h.queue.artifact_by_id(&job.id, &artifact.id).await,
        "artifact_not_found",
    );
    // SQLite kept the bytes as files: they are gone too.
    assert!(!h.artifacts.path().join(job.id.to_string()).exists());
    // The row stays, as it was.
    let after = h.get(&job).await;
    assert_eq!(after.status, JobState::Succeeded);
    assert_eq!(after.finished_at, job.finished_at);
    // Done once: the next pass finds nothing.
    assert!(retention(&h, 4).run_once().await.unwrap().is_empty());
    assert_eq!(h.event_kinds(&job).await.len(), 1);
}

pub async fn log_lines_go_after_a_day_where_the_step_s_log_artifact_holds_them(h: Harness) {
    // Step 0's log is stored, step 1's never was (its worker died, say).
    let job = ran(&h, 25, &[task::step_log(0)], true).await;
    let before = h.event_kinds(&job).await.len();
    h.advance(DAY);
    assert!(retention(&h, 10).run_once().await.unwrap().is_empty());
    h.advance(Duration::from_millis(1));
    let report = retention(&h, 10).run_once().await.unwrap();
    assert_eq!(report.logs_compacted, [job.id]);
    assert_eq!(report.log_lines, 25);
    assert!(report.history_deleted.is_empty());
    assert_eq!(log_steps(&h, &job).await, vec![1; 25]);
    // Every other event stays.
    assert_eq!(h.event_kinds(&job).await.len(), before - 25);
    // Once compacted the job is not looked at again, by this pass or a fresh one.
    assert!(retention(&h, 10).run_once().await.unwrap().is_empty());
    h.advance(DAY);
    assert!(retention(&h, 10).run_once().await.unwrap().is_empty());
    assert_eq!(log_steps(&h, &job).await.len(), 25);
}

pub async fn queued_running_and_recent_jobs_are_never_touched(h: Harness) {
    let queued = h.create(Spec::priority(-1)).await;
    let running = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &running).await;
    for n in 0..5 {
        h.queue
            .append_event(&running.id, &fence(&claimed), log_line(0, n))
            .await
            .unwrap();
    }
    h.queue
        .add_artifact(
            &running.id,
            &fence(&claimed),
            &task::step_log(0),
            "text/plain",
            b"x",
        )
        .await
        .unwrap();
    h.advance(400 * DAY);
    let recent = ran(&h, 3, &[task::step_log(0), task::step_log(1)], true).await;
    let config = RetentionConfig {
        jobs_after: Some(60 * DAY),
        ..RetentionConfig::default()
    };
    let report = Retention::new(h.queue.clone(), config)
        .run_once()
        .await
        .unwrap();
    assert!(report.is_empty(), "{report:?}");
    assert_eq!(h.event_kinds(&queued).await, [events::JOB_CREATED]);
    assert_eq!(h.event_kinds(&recent).await.len(), 2 + 2 * 3 + 3);
    assert_eq!(log_steps(&h, &running).await.len(), 5);
    assert_eq!(h.get(&running).await.status, JobState::Running);
}

pub async fn a_job_retried_after_its_history_went_is_due_again_once_it_finishes_again(h: Harness) {
    let job = ran(&h, 2, &[], false).await;
    assert_eq!(job.status, JobState::Failed);
    h.advance(31 * DAY);
    assert_eq!(
        retention(&h, 100).run_once().await.unwrap().history_deleted,
        [job.id]
    );
    let retried = h
        .queue
        .retry_from_step(&job.id, Some("alice"), Some(0))
        .await
        .unwrap();
    assert_eq!(retried.status, JobState::Queued);
    // Not finished now: left alone, however old its first end.
    assert!(retention(&h, 100).run_once().await.unwrap().is_empty());
    let claimed = h.claim_exactly("w2", &job).await;
    let done = h
        .queue
        .complete(&job.id, &fence(&claimed), None)
        .await
        .unwrap();
    let kinds = h.event_kinds(&job).await;
    assert_eq!(kinds[0], events::JOB_HISTORY_DELETED);
    h.advance(30 * DAY);
    assert!(retention(&h, 100).run_once().await.unwrap().is_empty());
    h.advance(Duration::from_millis(1));
    let report = retention(&h, 100).run_once().await.unwrap();
    assert_eq!(report.history_deleted, [job.id]);
    assert_eq!(report.events as usize, kinds.len());
    let event = h.queue.list_events(&job.id, 0, 10).await.unwrap();
    assert_eq!(event.len(), 1);
    let payload: HistoryDeleted = contract::events::read_payload(&event[0].payload).unwrap();
    assert_eq!(Some(payload.finished_at), done.finished_at);
}

pub async fn job_rows_are_deleted_only_when_asked_and_their_history_goes_first(h: Harness) {
    let old = ran(&h, 3, &[task::step_log(0)], true).await;
    h.advance(10 * DAY);
    let young = ran(&h, 3, &[], false).await;
    h.advance(DAY);
    // The defaults keep rows: after a year, the history has gone, every row is there.
    h.advance(365 * DAY);
    let report = retention(&h, 2).run_once().await.unwrap();
    assert_eq!(report.history_deleted.len(), 2);
    assert!(report.jobs_deleted.is_empty());
    h.get(&old).await;
    // Rows kept 370 days: only the older job is past it. Its history went already.
    let report = rows_only(&h, 370 * DAY, Some(DAY)).await;
    assert_eq!(report.jobs_deleted, [old.id]);
    assert_code(h.queue.get_job(&old.id).await, "job_not_found");
    assert_eq!(h.get(&young).await.status, JobState::Failed);
    // A row whose history is still kept goes with it: rows kept 1 day, history forever.
    let fresh = ran(&h, 3, &[task::step_log(1)], true).await;
    h.advance(DAY + Duration::from_millis(1));
    let report = rows_only(&h, DAY, None).await;
    assert_eq!(report.history_deleted, [fresh.id]);
    assert_eq!(report.artifacts, 1);
    let mut deleted = report.jobs_deleted.clone();
    deleted.sort();
    let mut expected = vec![young.id, fresh.id];
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(!h.artifacts.path().join(fresh.id.to_string()).exists());
    // No event outlives its job, on either backend.
    let orphans = "SELECT count(*) FROM job_events e \
                   WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)";
    assert_eq!(h.count(orphans).await, 0);
}

/// A pass that keeps rows `rows`, history as long (no age of its own), log lines `logs`,
/// a row a batch.
async fn rows_only(h: &Harness, rows: Duration, logs: Option<Duration>) -> RetentionReport {
    let config = RetentionConfig {
        jobs_after: Some(rows),
        history_after: None,
        logs_after: logs,
        batch_size: 1,
        ..RetentionConfig::default()
    };
    Retention::new(h.queue.clone(), config)
        .run_once()
        .await
        .unwrap()
}

pub async fn two_replicas_at_once_delete_each_history_once(h: Harness) {
    let mut jobs = Vec::new();
    for _ in 0..6 {
        jobs.push(ran(&h, 8, &[task::step_log(0)], true).await);
    }
    h.advance(31 * DAY);
    let other = h.queue_with(|_| {}).await;
    let a = retention(&h, 3);
    let b = Retention::new(
        other,
        RetentionConfig {
            batch_size: 3,
            ..RetentionConfig::default()
        },
    );
    let (ra, rb) = tokio::join!(a.run_once(), b.run_once());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let mut done: Vec<_> = ra
        .history_deleted
        .iter()
        .chain(&rb.history_deleted)
        .collect();
    done.sort();
    let mut expected: Vec<_> = jobs.iter().map(|j| &j.id).collect();
    expected.sort();
    assert_eq!(done, expected, "each history deleted once: {ra:?} {rb:?}");
    for job in &jobs {
        assert_eq!(h.event_kinds(job).await, [events::JOB_HISTORY_DELETED]);
        assert!(h.queue.list_artifacts(&job.id).await.unwrap().is_empty());
    }
}

pub async fn jobs_that_finished_in_one_millisecond_are_compacted_across_batches(h: Harness) {
    let mut jobs = Vec::new();
    for _ in 0..7 {
        jobs.push(
            ran(&h, 2, &[task::step_log(0), task::step_log(1)], true)
                .await
                .id,
        );
    }
    h.advance(DAY + Duration::from_millis(1));
    let report = retention(&h, 3).run_once().await.unwrap();
    let mut compacted = report.logs_compacted.clone();
    compacted.sort();
    jobs.sort();
    assert_eq!(compacted, jobs);
    assert_eq!(report.log_lines, 7 * 4);
}

pub async fn a_job_passed_over_before_it_finished_is_done_once_its_end_is_old_enough(h: Harness) {
    // Made two days ago and still queued: a pass walks past it.
    let late = h.create(Spec::default()).await;
    h.advance(2 * DAY);
    assert!(retention(&h, 10).run_once().await.unwrap().is_empty());
    let late = run(&h, &late, 4, &[task::step_log(0)], true).await;
    h.advance(DAY + Duration::from_millis(1));
    let report = retention(&h, 10).run_once().await.unwrap();
    assert_eq!(report.logs_compacted, [late.id]);
    assert_eq!(report.log_lines, 4);
    assert!(retention(&h, 10).run_once().await.unwrap().is_empty());
    h.advance(30 * DAY);
    let report = retention(&h, 10).run_once().await.unwrap();
    assert_eq!(report.history_deleted, [late.id]);
}

pub async fn a_job_left_waiting_holds_back_none_of_those_after_it(h: Harness) {
    // A job no worker can claim stays queued, older than every one after it.
    let waiting = h
        .create(Spec {
            extra_caps: vec!["nobody-has-this".into()],
            ..Spec::default()
        })
        .await;
    let mut done = Vec::new();
    for _ in 0..5 {
        done.push(
            ran(&h, 2, &[task::step_log(0), task::step_log(1)], true)
                .await
                .id,
        );
    }
    h.advance(DAY + Duration::from_millis(1));
    let report = retention(&h, 2).run_once().await.unwrap();
    let mut compacted = report.logs_compacted.clone();
    compacted.sort();
    done.sort();
    assert_eq!(compacted, done);
    assert_eq!(report.log_lines, 5 * 4);
    // Walked once: the next passes find nothing, however long the first job waits.
    for _ in 0..3 {
        h.advance(DAY);
        assert!(retention(&h, 2).run_once().await.unwrap().is_empty());
    }
    assert_eq!(h.get(&waiting).await.status, JobState::Queued);
    assert_eq!(h.event_kinds(&waiting).await, [events::JOB_CREATED]);
}

/// However short the keep, a walk passes no job younger than its slack (a minute by
/// default): one made just before it, with a smaller id, could still be committing.
pub async fn a_walk_passes_no_job_younger_than_its_slack(h: Harness) {
    let job = ran(&h, 3, &[task::step_log(0), task::step_log(1)], true).await;
    let keep_ten_seconds = || {
        Retention::new(
            h.queue.clone(),
            RetentionConfig {
                logs_after: Some(Duration::from_secs(10)),
                ..RetentionConfig::default()
            },
        )
    };
    h.advance(Duration::from_secs(30));
    assert!(keep_ten_seconds().run_once().await.unwrap().is_empty());
    h.advance(Duration::from_secs(31));
    let report = keep_ten_seconds().run_once().await.unwrap();
    assert_eq!(report.logs_compacted, [job.id]);
    assert_eq!(report.log_lines, 6);
}
