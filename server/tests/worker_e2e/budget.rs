//! Budgets end to end: the worker runs a task through the scripted agent, whose runs say
//! what they cost; the job pauses for its budget where the queue asks, waits holding
//! nothing until an operator raises it, and then finishes.

use contract::JobState;
use contract::events::PauseReason;
use contract::job::{events, task};
use serde_json::json;

use super::setup;

#[tokio::test]
async fn a_budget_reached_mid_loop_pauses_the_job_until_it_is_raised_and_then_it_finishes() {
    let s = setup().await;
    // Every agent run (the step and each iteration) costs $0.30 and adds a line.
    let check = "test $(wc -l < runs.txt) -ge 4";
    let job = s
        .submit_task(
            json!({
                "instructions": "Count\n@fake cost 0.3\n@fake write runs.txt run",
                "steps": [{ "instructions": "Begin" }],
                "completion": { "command": check, "maxIterations": 5 },
                "budget": { "maxCostUsd": 0.8 },
            }),
            json!({}),
        )
        .await;
    let (paused, kinds) = s
        .until(&job, "the budget's pause", |j, _| {
            j.status == JobState::Paused
        })
        .await;
    assert_eq!(paused.pause_reason, Some(PauseReason::Budget), "{kinds:#?}");
    let exceeded: Vec<&String> = kinds
        .iter()
        .filter(|k| k.starts_with(events::JOB_BUDGET_EXCEEDED))
        .collect();
    assert_eq!(exceeded.len(), 1, "{kinds:#?}");
    assert!(exceeded[0].contains("$0.90 of $0.80"), "{exceeded:?}");
    // The step and two iterations ran; the third waits for the raise.
    let agent_runs = |kinds: &[String]| {
        kinds
            .iter()
            .filter(|k| k.starts_with(task::STEP_FINISHED))
            .count()
            + kinds
                .iter()
                .filter(|k| {
                    k.starts_with(task::ITERATION_STARTED) && k.contains("the agent runs again")
                })
                .count()
    };
    assert_eq!(agent_runs(&kinds), 3, "{kinds:#?}");
    assert!((paused.usage.unwrap().cost_usd.unwrap() - 0.9).abs() < 1e-9);
    assert!(paused.usage.unwrap().duration_ms.is_some());
    assert_eq!(paused.claimed_by, None);
    assert_eq!(
        paused.resume_from.as_ref().and_then(|c| c.after_iteration),
        Some(2),
        "{kinds:#?}"
    );

    // Spent, it does not resume; raised, it does, and the loop goes on to pass.
    let refused = s.user.resume_job(&job.id, None).await.unwrap_err();
    assert!(refused.to_string().contains("budget is spent"), "{refused}");
    let raised = s
        .user
        .set_budget(
            &job.id,
            &contract::JobBudget {
                max_cost_usd: Some(2.0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(raised.status, JobState::Paused);
    s.user.resume_job(&job.id, None).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    assert!(
        (done.usage.unwrap().cost_usd.unwrap() - 1.2).abs() < 1e-9,
        "{:?}",
        done.usage
    );
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with(events::JOB_BUDGET_CHANGED)),
        "{kinds:#?}"
    );
}

#[tokio::test]
async fn agent_minutes_running_out_stop_the_step_at_once_and_the_raise_runs_it_again() {
    let s = setup().await;
    let job = s
        .submit_task(
            json!({
                "instructions": "Wait",
                "publish": { "mode": "branch" },
                "git": { "newBranch": "budget/minutes" },
                "steps": [
                    { "instructions": "@fake write one.txt first" },
                    { "instructions": "@fake sleep 5\n@fake write two.txt second" },
                ],
                // 2.4 s of agent time: the second step runs out of it.
                "budget": { "maxMinutes": 0.04 },
            }),
            json!({}),
        )
        .await;
    let (paused, kinds) = s
        .until(&job, "the budget's pause", |j, _| {
            j.status == JobState::Paused
        })
        .await;
    assert_eq!(paused.pause_reason, Some(PauseReason::Budget), "{kinds:#?}");
    let stopped = kinds
        .iter()
        .find(|k| k.starts_with(task::STEP_CANCELLED))
        .unwrap_or_else(|| panic!("the step was stopped: {kinds:#?}"));
    assert!(stopped.contains("stopped in"), "{stopped}");
    let spent = paused.usage.unwrap().duration_ms.unwrap();
    assert!((2400..5000).contains(&spent), "{spent} ms of agent time");
    assert!(
        !kinds
            .iter()
            .any(|k| k.starts_with(task::STEP_FINISHED) && k.contains("2/2")),
        "{kinds:#?}"
    );
    assert_eq!(
        paused.resume_from.as_ref().and_then(|c| c.after_step),
        Some(0)
    );

    s.user
        .set_budget(
            &job.id,
            &contract::JobBudget {
                max_minutes: Some(1.0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    s.user.resume_job(&job.id, None).await.unwrap();
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    let two = worker::testing::run(
        std::path::Path::new(&s.remote),
        &["show", "budget/minutes:two.txt"],
    );
    assert_eq!(two, "second");
}
