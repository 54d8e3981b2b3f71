//! A success hands in its job and takes the worker's next in the same call
//! (`complete-and-claim`), unless the worker's per-runtime limits make what to offer
//! depend on the jobs running at that moment.

use contract::JobState;
use queue::{Role, TokenKind};
use serde_json::json;

use super::{Setup, setup, setup_with};

/// How many answers of `status` the server counted for `route`, from its metrics.
async fn answered(s: &Setup, route: &str, status: u16) -> u64 {
    let token = s
        .server
        .token("scraper", TokenKind::User, Some(Role::Viewer))
        .await;
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", s.server.url()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = format!(
        "stepwise_http_requests_total{{method=\"POST\",route=\"{route}\",status=\"{status}\"}} "
    );
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Three jobs, run one after another by a worker of one slot, all succeeded.
async fn run_three(s: &Setup) {
    let mut jobs = Vec::new();
    for n in 0..3 {
        jobs.push(
            s.submit(json!([{ "instructions": format!("step {n}") }]))
                .await,
        );
    }
    for job in &jobs {
        let (done, _) = s.until(job, "success", |j, _| j.status.is_terminal()).await;
        assert_eq!(done.status, JobState::Succeeded, "{done:?}");
        assert_eq!(done.attempt, 1);
        assert_eq!(done.claimed_by.as_deref(), Some("e2e-worker"));
    }
}

#[tokio::test]
async fn a_worker_that_finishes_a_job_takes_the_next_in_the_same_call() {
    let s = setup().await;
    run_three(&s).await;
    let finishing = "/api/queue/jobs/{id}/complete-and-claim";
    assert_eq!(answered(&s, finishing, 200).await, 3);
    assert_eq!(answered(&s, "/api/queue/jobs/{id}/complete", 200).await, 0);
}

#[tokio::test]
async fn under_per_runtime_limits_a_success_only_completes() {
    let s = setup_with(|config| {
        config.max_running_per_runtime.insert("claude".into(), 1);
    })
    .await;
    run_three(&s).await;
    let finishing = "/api/queue/jobs/{id}/complete-and-claim";
    assert_eq!(answered(&s, finishing, 200).await, 0);
    assert_eq!(answered(&s, "/api/queue/jobs/{id}/complete", 200).await, 3);
}
