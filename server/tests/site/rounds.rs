//! The job page's follow-up: an ended job offers "Follow up", and its form queues the job's
//! next round.

use axum::http::StatusCode;
use contract::JobState;
use serde_json::json;

use stepwise::testing::site::{call_server_fn, claimed_job, get, session_cookie, test_site};

#[tokio::test]
async fn an_ended_job_s_page_offers_a_follow_up_whose_form_queues_its_next_round() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let cookie = session_cookie(&queue).await;
    let raw = json!({ "payload": { "repository": "octo/repo", "task": {
        "instructions": "Tidy",
        "steps": [{ "instructions": "one" }],
    } } });
    let (job, fence) = claimed_job(&queue, &raw, "w1").await;
    let page = format!("/tasks/queue/{}", job.id);
    let (_, _, running) = get(&app, &cookie, &page).await;
    assert!(
        !running.contains(r#"data-testid="follow-up-form""#),
        "not while it runs"
    );
    queue
        .complete(&job.id, &fence, Some("tidied".into()))
        .await
        .unwrap();
    let (status, _, html) = get(&app, &cookie, &page).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"data-testid="follow-up-form""#), "the form");
    assert!(html.contains(">Follow up<"), "the card's title");

    let blank = format!("id={}&instructions=+", job.id);
    let (status, body) = call_server_fn(&app, &cookie, "follow_up", &blank).await;
    assert!(status.is_client_error(), "{status} {body}");
    assert!(body.contains("instructions"), "{body}");
    let form = format!("id={}&instructions=and+the+docs", job.id);
    let (status, body) = call_server_fn(&app, &cookie, "follow_up", &form).await;
    assert!(status.is_success(), "{status} {body}");
    let next = queue.get_job(&job.id).await.unwrap();
    assert_eq!((next.status, next.round), (JobState::Queued, 2));
    let (_, _, html) = get(&app, &cookie, &page).await;
    assert!(
        html.contains("and the docs"),
        "the round's step is on the page"
    );
    assert!(
        html.contains("2 (a follow-up, from step 2)"),
        "the round is a fact"
    );
    assert!(
        !html.contains(r#"data-testid="follow-up-form""#),
        "not while it is queued"
    );
}

#[tokio::test]
async fn a_job_whose_pull_request_needs_a_person_is_marked_on_the_queue_page() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let cookie = session_cookie(&queue).await;
    let raw = json!({ "payload": { "repository": "octo/repo", "task": {
        "instructions": "Greet <b>everyone</b>",
        "publish": { "mode": "pr", "feedback": { "maxRounds": 1 } },
    } } });
    let (job, fence) = claimed_job(&queue, &raw, "w1").await;
    queue
        .complete(&job.id, &fence, Some("pull request".into()))
        .await
        .unwrap();
    let (_, _, html) = get(&app, &cookie, "/tasks/queue").await;
    assert!(
        !html.contains(r#"data-testid="needs-attention""#),
        "not yet"
    );
    let watches = queue
        .claim_watches("r1", std::time::Duration::from_secs(30), 10)
        .await
        .unwrap();
    let asked = contract::events::NeedsAttention {
        reason: "its pull request still fails <script>".into(),
        pull_request: None,
        rounds: 1,
        waiting: Vec::new(),
    };
    queue
        .needs_attention(&watches[0], "r1", &asked)
        .await
        .unwrap()
        .expect("asked");
    let (status, _, html) = get(&app, &cookie, "/tasks/queue").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        html.matches(r#"data-testid="needs-attention""#).count(),
        1,
        "{html}"
    );
    let page = format!("/tasks/queue/{}", job.id);
    let (_, _, html) = get(&app, &cookie, &page).await;
    assert!(
        html.contains("needs attention: its pull request still fails &lt;script&gt;"),
        "the event, escaped"
    );
    assert!(
        html.contains(
            "failed checks and reviews asking for changes on its pull request become rounds (0 of 1 used)"
        ),
        "the feedback is a fact"
    );
}
