//! A task with a completion check, end to end: submitted over REST, its loop run by the
//! worker through the scripted agent, and read back as events, artifacts and usage.

use contract::JobState;
use contract::job::task;
use serde_json::json;

use super::{Setup, setup};

#[tokio::test]
async fn a_task_with_a_check_loops_until_it_passes_and_reads_back_iteration_by_iteration() {
    let s = setup().await;
    let check = "echo \"runs: $(wc -l < runs.txt)\"; test $(wc -l < runs.txt) -ge 2";
    let job = s
        .submit_task(
            json!({
                "instructions": "Count\n@fake write runs.txt run",
                "steps": [{ "instructions": "Begin" }],
                "completion": { "command": check, "maxIterations": 3, "criteria": "two runs" },
            }),
            json!({}),
        )
        .await;
    let (done, kinds) = s
        .until(&job, "the end", |j, _| j.status.is_terminal())
        .await;
    assert_eq!(done.status, JobState::Succeeded, "{done:?} {kinds:#?}");
    let loop_part: Vec<&String> = kinds
        .iter()
        .filter(|k| k.starts_with("task.iteration."))
        .collect();
    assert_eq!(loop_part.len(), 4, "{kinds:#?}");
    assert!(
        loop_part[1].contains("iteration 0/3: the check failed (exit code 1)"),
        "{loop_part:?}"
    );
    assert!(
        loop_part[3].contains("iteration 1/3: the check passed"),
        "{loop_part:?}"
    );
    let artifacts = s.artifacts(&job).await;
    assert_eq!(
        Setup::artifact(&artifacts, &task::check_log(0)),
        "runs: 1\n"
    );
    assert_eq!(
        Setup::artifact(&artifacts, &task::check_log(1)),
        "runs: 2\n"
    );
    assert!(
        Setup::artifact(&artifacts, &task::iteration_patch(1)).contains("+run"),
        "{artifacts:?}"
    );
    // A checkpoint after the step and after the iteration, listed by the API.
    let checkpoints = s.user.list_checkpoints(&job.id).await.unwrap();
    let ids: Vec<&str> = checkpoints.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["step-1", "iteration-1"]);
    let last = Setup::artifact(&artifacts, &checkpoints[1].saved.artifact);
    assert_eq!(last.matches("+run").count(), 2, "{last}");
    // The stored task keeps its check as sent.
    assert_eq!(
        done.payload["task"]["completion"],
        json!({ "criteria": "two runs", "maxIterations": 3, "command": check })
    );
}
