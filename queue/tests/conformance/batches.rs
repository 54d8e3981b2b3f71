//! Batched claims and completions: one transaction for many jobs, each job answered as if
//! on its own.

use std::collections::HashMap;
use std::time::Duration;

use contract::{JobId, JobState};
use queue::{Completion, Fence, MAX_CLAIM_BATCH};

use crate::harness::*;

pub async fn claim_many_leases_up_to_the_limit_in_claim_order(h: Harness) {
    let mut created = Vec::new();
    for priority in [0, 5, 1, 5, 0] {
        created.push(h.create(Spec::priority(priority)).await);
        h.advance(Duration::from_millis(5));
    }
    let batch = h.queue.claim_many(&request("w1"), 3).await.unwrap();
    let order: Vec<usize> = batch
        .iter()
        .map(|job| created.iter().position(|c| c.id == job.id).unwrap())
        .collect();
    assert_eq!(order, [1, 3, 2]);
    for job in &batch {
        assert_eq!(job.status, JobState::Running);
        assert_eq!(job.claimed_by.as_deref(), Some("w1"));
        assert_eq!(job.attempt, 1);
        assert_eq!(h.get(job).await, *job);
        assert_eq!(h.event_kinds(job).await, ["job.created", "job.claimed"]);
    }
    let rest = h.queue.claim_many(&request("w2"), 10).await.unwrap();
    let order: Vec<usize> = rest
        .iter()
        .map(|job| created.iter().position(|c| c.id == job.id).unwrap())
        .collect();
    assert_eq!(order, [0, 4]);
    assert!(
        h.queue
            .claim_many(&request("w3"), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn claim_many_refuses_a_limit_out_of_range(h: Harness) {
    h.create(Spec::default()).await;
    for limit in [0, MAX_CLAIM_BATCH + 1] {
        assert_code(
            h.queue.claim_many(&request("w1"), limit).await,
            "invalid_queue_payload",
        );
    }
    assert_eq!(
        h.queue
            .claim_many(&request("w1"), MAX_CLAIM_BATCH)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn complete_many_answers_each_job_and_a_refused_one_holds_back_no_other(h: Harness) {
    for _ in 0..3 {
        h.create(Spec::default()).await;
    }
    let batch = h.queue.claim_many(&request("w1"), 3).await.unwrap();
    let stale = Fence::new("w1", 99);
    let unknown: JobId = "0190b6e2-0000-7000-8000-000000000000".parse().unwrap();
    let completions = vec![
        Completion {
            id: batch[0].id,
            fence: fence(&batch[0]),
            summary: Some("first".into()),
        },
        Completion {
            id: batch[1].id,
            fence: stale,
            summary: None,
        },
        Completion {
            id: unknown,
            fence: fence(&batch[2]),
            summary: None,
        },
        Completion {
            id: batch[2].id,
            fence: fence(&batch[2]),
            summary: None,
        },
    ];
    let mut answers = h
        .queue
        .complete_many(completions)
        .await
        .unwrap()
        .into_iter();
    assert_eq!(answers.len(), 4);
    let first = answers.next().unwrap().unwrap();
    assert_eq!(first.status, JobState::Succeeded);
    assert_eq!(first.result_summary.as_deref(), Some("first"));
    assert_code(answers.next().unwrap(), "job_ownership_mismatch");
    assert_code(answers.next().unwrap(), "job_not_found");
    assert_eq!(answers.next().unwrap().unwrap().status, JobState::Succeeded);

    assert_eq!(h.get(&batch[0]).await, first);
    assert_eq!(h.get(&batch[1]).await.status, JobState::Running);
    assert_eq!(h.get(&batch[2]).await.status, JobState::Succeeded);
    assert_eq!(
        h.event_kinds(&batch[0]).await,
        ["job.created", "job.claimed", "job.completed"]
    );
    assert_eq!(
        h.event_kinds(&batch[1]).await,
        ["job.created", "job.claimed"]
    );

    // Completing again in a batch is the same no-op as completing again alone.
    let again = h
        .queue
        .complete_many(vec![Completion {
            id: batch[0].id,
            fence: fence(&batch[0]),
            summary: Some("first".into()),
        }])
        .await
        .unwrap();
    assert_eq!(again[0].as_ref().unwrap(), &first);
    assert_eq!(h.event_kinds(&batch[0]).await.len(), 3);
}

pub async fn batch_claimers_and_completers_run_every_job_exactly_once(h: Harness) {
    const JOBS: usize = 300;
    for i in 0..JOBS {
        h.create(Spec::priority((i % 5) as i32)).await;
    }
    let mut tasks = Vec::new();
    for w in 0..6 {
        let queue = h.queue.clone();
        tasks.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            let mut mine = Vec::new();
            loop {
                let batch = queue.claim_many(&request(&worker), 7).await.unwrap();
                if batch.is_empty() {
                    return mine;
                }
                let completions = batch
                    .iter()
                    .map(|job| Completion {
                        id: job.id,
                        fence: fence(job),
                        summary: None,
                    })
                    .collect();
                for answer in queue.complete_many(completions).await.unwrap() {
                    assert_eq!(answer.unwrap().status, JobState::Succeeded);
                }
                mine.extend(batch.into_iter().map(|job| job.id));
            }
        }));
    }
    let mut claims: HashMap<JobId, usize> = HashMap::new();
    for task in tasks {
        let mine = tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("batch workers finish")
            .unwrap();
        for id in mine {
            *claims.entry(id).or_default() += 1;
        }
    }
    assert_eq!(claims.len(), JOBS);
    assert!(claims.values().all(|&n| n == 1), "a job was claimed twice");
}

pub async fn complete_many_decides_on_the_row_what_another_replica_changed_and_a_job_named_twice(
    h: Harness,
) {
    for _ in 0..3 {
        h.create(Spec::default()).await;
    }
    let batch = h.queue.claim_many(&request("w1"), 3).await.unwrap();
    // Another replica changes one of them: this replica's copy of that row is now stale.
    let other = h.queue_with(|_| {}).await;
    let asked = other
        .request_cancel(&batch[1].id, Some("u1"), Some("late".into()))
        .await
        .unwrap();
    assert!(asked.cancel_requested_at.is_some());
    let done = |job: &contract::Job| Completion {
        id: job.id,
        fence: fence(job),
        summary: Some("done".into()),
    };
    let answers: Vec<_> = h
        .queue
        .complete_many(vec![
            done(&batch[0]),
            done(&batch[1]),
            done(&batch[2]),
            done(&batch[2]),
        ])
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for (answer, job) in answers
        .iter()
        .zip([&batch[0], &batch[1], &batch[2], &batch[2]])
    {
        assert_eq!(answer.status, JobState::Succeeded);
        assert_eq!(answer.id, job.id);
    }
    // A cancel requested too late loses to the completion, and the answer shows the row as
    // it is, cancel request included.
    assert_eq!(answers[1].cancel_requested_at, asked.cancel_requested_at);
    assert_eq!(
        answers[2], answers[3],
        "the second completion is the first's no-op"
    );
    for (answer, job) in answers.iter().zip(&batch) {
        assert_eq!(&h.get(job).await, answer);
        let kinds = h.event_kinds(job).await;
        assert_eq!(kinds.iter().filter(|k| *k == "job.completed").count(), 1);
        assert_eq!(kinds.last().map(String::as_str), Some("job.completed"));
    }
}
