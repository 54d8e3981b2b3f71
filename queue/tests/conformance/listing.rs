//! Listing jobs: newest first, keyset pages, filters.

use contract::JobState;
use queue::JobFilter;

use crate::harness::*;

pub async fn jobs_are_listed_newest_first_in_keyset_pages(h: Harness) {
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(h.create(Spec::default()).await.id);
    }
    ids.reverse();
    let mut seen = Vec::new();
    let mut filter = JobFilter {
        limit: Some(2),
        ..JobFilter::default()
    };
    let mut pages = 0;
    loop {
        let page = h.queue.list_jobs(&filter).await.unwrap();
        pages += 1;
        seen.extend(page.jobs.iter().map(|j| j.id));
        // A job created mid-listing does not shift the pages that follow.
        if pages == 1 {
            h.create(Spec::default()).await;
        }
        match page.next_cursor {
            Some(cursor) => filter.after = Some(cursor),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    assert_eq!(pages, 3);
}

pub async fn listing_filters_by_state_and_type(h: Harness) {
    let a = h.create(Spec::default()).await;
    let b = h.create(Spec::default()).await;
    let c = h.create(Spec::default()).await;
    h.claim_exactly("w1", &a).await;
    h.queue.request_cancel(&b.id, None, None).await.unwrap();
    let ids = |filter: JobFilter| {
        let queue = h.queue.clone();
        async move {
            queue
                .list_jobs(&filter)
                .await
                .unwrap()
                .jobs
                .into_iter()
                .map(|j| j.id)
                .collect::<Vec<_>>()
        }
    };
    let by_state = |state| JobFilter {
        status: Some(state),
        ..JobFilter::default()
    };
    assert_eq!(ids(by_state(JobState::Running)).await, [a.id]);
    assert_eq!(ids(by_state(JobState::Cancelled)).await, [b.id]);
    assert_eq!(ids(by_state(JobState::Queued)).await, [c.id]);
    assert_eq!(
        ids(by_state(JobState::DeadLetter)).await,
        Vec::<contract::JobId>::new()
    );
    let by_type = |t: &str| JobFilter {
        job_type: Some(t.into()),
        ..JobFilter::default()
    };
    assert_eq!(ids(by_type("task")).await, [c.id, b.id, a.id]);
    assert_eq!(ids(by_type("other")).await, Vec::<contract::JobId>::new());
    let both = JobFilter {
        status: Some(JobState::Queued),
        job_type: Some("task".into()),
        limit: Some(1),
        ..JobFilter::default()
    };
    let page = h.queue.list_jobs(&both).await.unwrap();
    assert_eq!(page.jobs.len(), 1);
    assert_eq!(page.next_cursor, None);
}

/// A job in every state, each found by the list's filter on its state and counted in its
/// state (two succeeded, so the count of the most common state is more than a guess).
pub async fn every_state_is_listed_and_counted(h: Harness) {
    let mut made: Vec<(JobState, contract::JobId)> = Vec::new();
    for _ in 0..2 {
        let job = h.create(Spec::default()).await;
        let claimed = h.claim_exactly("w1", &job).await;
        h.queue
            .complete(&job.id, &fence(&claimed), None)
            .await
            .unwrap();
        made.push((JobState::Succeeded, job.id));
    }
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .fail(&job.id, &fence(&claimed), "gave up".into(), false)
        .await
        .unwrap();
    made.push((JobState::Failed, job.id));
    let job = h.create(Spec::attempts(1)).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .fail(&job.id, &fence(&claimed), "went".into(), true)
        .await
        .unwrap();
    made.push((JobState::DeadLetter, job.id));
    let job = crate::golden::task_job(&h, true).await;
    let claimed = h.claim_exactly("w1", &job).await;
    h.queue
        .request_approval(&job.id, &fence(&claimed))
        .await
        .unwrap();
    made.push((JobState::AwaitingApproval, job.id));
    let job = h.create(Spec::default()).await;
    h.claim_exactly("w1", &job).await;
    made.push((JobState::Running, job.id));
    let job = h.create(Spec::default()).await;
    h.queue.request_pause(&job.id, None, false).await.unwrap();
    made.push((JobState::Paused, job.id));
    let job = h.create(Spec::default()).await;
    h.queue.request_cancel(&job.id, None, None).await.unwrap();
    made.push((JobState::Cancelled, job.id));
    made.push((JobState::Queued, h.create(Spec::default()).await.id));

    for state in JobState::ALL {
        let filter = JobFilter {
            status: Some(state),
            ..JobFilter::default()
        };
        let listed: Vec<_> = h.queue.list_jobs(&filter).await.unwrap().jobs;
        let mut expected: Vec<_> = made
            .iter()
            .filter(|(s, _)| *s == state)
            .map(|(_, id)| *id)
            .collect();
        expected.reverse();
        assert_eq!(
            listed.iter().map(|j| j.id).collect::<Vec<_>>(),
            expected,
            "{state}"
        );
        assert!(listed.iter().all(|j| j.status == state), "{state}");
    }
    let mut counts = h.queue.count_jobs_by_state().await.unwrap();
    counts.sort_by_key(|(state, _)| state.as_str());
    let mut expected: Vec<(JobState, u64)> = JobState::ALL
        .into_iter()
        .map(|state| {
            (
                state,
                made.iter().filter(|(s, _)| *s == state).count() as u64,
            )
        })
        .collect();
    expected.sort_by_key(|(state, _)| state.as_str());
    assert_eq!(counts, expected);
}

/// A state with no job is left out of the counts, the most common one too.
pub async fn states_with_no_job_are_not_counted(h: Harness) {
    assert_eq!(h.queue.count_jobs_by_state().await.unwrap(), []);
    h.create(Spec::default()).await;
    assert_eq!(
        h.queue.count_jobs_by_state().await.unwrap(),
        [(JobState::Queued, 1)]
    );
}

pub async fn a_cursor_the_queue_did_not_issue_is_refused(h: Harness) {
    let filter = JobFilter {
        after: Some("garbage".into()),
        ..JobFilter::default()
    };
    assert_code(h.queue.list_jobs(&filter).await, "invalid_queue_payload");
}
