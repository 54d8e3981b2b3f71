//! The whole site as `stepwise serve` builds it: pages rendered on the server, the
//! dashboard's server functions, the login, and what the pages show of a job's usage.

mod retention;
mod rounds;
mod session;
mod usage_pages;

use std::time::Duration;

use axum::http::{StatusCode, header};
use stepwise::testing::html;
use stepwise::testing::site::{
    Backend, TestDb, call_server_fn, claimed_job, get, session_as, session_cookie, test_site,
    test_site_on,
};

#[tokio::test]
async fn root_redirects_to_the_queue_without_javascript() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let cookie = session_cookie(&queue).await;
    let (status, headers, _) = get(&app, &cookie, "/").await;
    assert_eq!(status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(headers[header::LOCATION], "/tasks/queue");
}

#[tokio::test]
async fn queue_pages_are_server_rendered_with_the_configured_publish_default() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let cookie = session_cookie(&queue).await;
    let (status, _, html) = get(&app, &cookie, "/tasks/queue").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Task queue"), "{html}");
    assert!(html.contains("No jobs here yet"), "{html}");
    let (status, _, html) = get(&app, &cookie, "/tasks/queue/new").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("New task"), "{html}");
    assert!(
        html.contains(r#"data-testid="default-publish-mode">none<"#),
        "{html}"
    );
    // No CLI is on this site's PATH: each runtime says what to install and where its key goes.
    for mode in contract::RuntimeMode::ALL {
        let hint = mode.install_hint();
        assert!(
            html.contains(hint.split(',').next().unwrap()),
            "{mode}: {html}"
        );
    }
    assert_eq!(
        html.matches(r#"data-testid="install-hint""#).count(),
        3,
        "{html}"
    );
    assert!(
        html.contains("/pkg/stepwise.js"),
        "the page must load the hydrate bundle"
    );
}

#[tokio::test]
async fn pages_render_whole_while_other_routers_are_built() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let cookie = session_cookie(&queue).await;
    /// Stops the builder however the test ends, a failed assertion included.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let (stop, built) = (
        StopOnDrop(Arc::new(AtomicBool::new(false))),
        Arc::new(AtomicUsize::new(0)),
    );
    let builder = {
        let (stop, built, other) = (stop.0.clone(), built.clone(), tempfile::tempdir().unwrap());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            while !stop.load(Ordering::SeqCst) {
                let _ = runtime.block_on(test_site(other.path(), "pr"));
                built.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // Before routes were generated once per process, a page rendered beside a second
    // generation hung in each of ten runs of this test.
    let mut rendered = 0;
    while rendered < 200 || built.load(Ordering::SeqCst) < 30 {
        let page = get(&app, &cookie, "/tasks/queue");
        let (status, _, html) = tokio::time::timeout(Duration::from_secs(20), page)
            .await
            .expect("a page never finished rendering while another router was built");
        assert_eq!(status, StatusCode::OK, "{html}");
        rendered += 1;
    }
    drop(stop);
    builder.join().unwrap();
}

#[tokio::test]
async fn a_viewer_cancelling_from_the_dashboard_is_refused_with_403_as_over_rest() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let viewer = session_as(&queue, queue::Role::Viewer).await;
    let raw = serde_json::json!({
        "payload": { "repository": "octo/repo", "task": { "instructions": "Fix it" } }
    });
    let job = queue.create_job(&raw, Some("admin")).await.unwrap();
    let (status, body) = call_server_fn(
        &app,
        &viewer,
        "cancel_job",
        &format!("id={}&reason=", job.id),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let error: contract::api::ErrorBody = serde_json::from_str(&body).unwrap();
    assert_eq!(error.code, "not_authorized");
    assert!(error.message.contains("viewers can read"), "{body}");
    assert_eq!(
        queue.get_job(&job.id).await.unwrap().status,
        contract::JobState::Queued
    );
    // The page offers a viewer no cancel form, and says why.
    let (status, _, html) = get(&app, &viewer, &format!("/tasks/queue/{}", job.id)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("cancel-not-allowed"), "{html}");
    assert!(!html.contains("Confirm cancel"), "{html}");
}

#[tokio::test]
async fn server_function_refusals_answer_with_the_rest_status_and_body() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        server_function_refusals_on(backend).await;
    }
}

async fn server_function_refusals_on(backend: Backend) {
    let site = tempfile::tempdir().unwrap();
    let db = TestDb::new(backend).await;
    let (app, queue) = test_site_on(site.path(), "none", db.url.as_deref()).await;
    let admin = session_cookie(&queue).await;
    let cases = [
        // Arguments that do not read never reach our code: server_fn answered 500.
        (
            "cancel_job",
            "nothing=here",
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "cancel_job",
            "id=not-a-job&reason=",
            StatusCode::NOT_FOUND,
            "job_not_found",
        ),
        ("load_job", "id=%00", StatusCode::NOT_FOUND, "job_not_found"),
        (
            "cancel_job",
            "id=0190a000-0000-7000-8000-000000000000&reason=",
            StatusCode::NOT_FOUND,
            "job_not_found",
        ),
        // A bad reason is named before the job is looked up.
        (
            "cancel_job",
            "id=0190a000-0000-7000-8000-000000000000&reason=%00",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_queue_payload",
        ),
        (
            "list_jobs",
            "status=nope",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_queue_payload",
        ),
        (
            "submit_task",
            "payload=%7B",
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
    ];
    for (name, form, status, code) in cases {
        let (got, body) = call_server_fn(&app, &admin, name, form).await;
        assert_eq!(got, status, "{name} {form}: {body}");
        let error: contract::api::ErrorBody =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{name} {form}: {e}: {body}"));
        assert_eq!(error.code, code, "{backend:?} {name} {form}: {body}");
    }
    drop(queue);
}

#[tokio::test]
async fn an_artifact_named_like_markup_stays_text_in_the_page_title() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let admin = session_cookie(&queue).await;
    let raw = serde_json::json!({
        "payload": { "repository": "octo/repo", "task": { "instructions": "Fix it" } }
    });
    let (job, fence) = claimed_job(&queue, &raw, "w1").await;
    // The `/` splits it into two legal parts, so a worker token could store it.
    let name = "</title><img src=x onerror=alert(1) data-pwn>.log";
    let artifact = queue
        .add_artifact(&job.id, &fence, name, "text/plain", b"x")
        .await
        .unwrap();
    let page = format!("/tasks/queue/{}/artifacts/{}", job.id, artifact.id);
    let (status, _, html) = get(&app, &admin, &page).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        html::title(&html).as_deref(),
        Some(format!("{name} · stepwise").as_str()),
    );
    let smuggled = html::smuggled(&html, "pwn");
    assert!(smuggled.is_empty(), "{smuggled:?}");
}

#[tokio::test]
async fn unknown_pages_are_404() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let cookie = session_cookie(&queue).await;
    let (status, _, html) = get(&app, &cookie, "/no/such/page").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("Go to the queue"), "{html}");
}

#[tokio::test]
async fn an_operator_pauses_resumes_and_retries_from_the_job_page_without_javascript() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let admin = session_cookie(&queue).await;
    let viewer = session_as(&queue, queue::Role::Viewer).await;
    let raw = serde_json::json!({
        "payload": { "repository": "octo/repo", "task": { "instructions": "Fix it",
            "steps": [{ "instructions": "one" }, { "instructions": "two" }] } }
    });
    let job = queue.create_job(&raw, Some("admin")).await.unwrap();
    let page = format!("/tasks/queue/{}", job.id);
    let (_, _, html) = get(&app, &admin, &page).await;
    assert!(html.contains("data-testid=\"pause\""), "{html}");
    assert!(!html.contains("data-testid=\"resume\""), "{html}");
    // A viewer gets no forms, and the functions refuse it.
    let (_, _, html) = get(&app, &viewer, &page).await;
    assert!(!html.contains("data-testid=\"pause\""), "{html}");
    let (status, _) = call_server_fn(&app, &viewer, "pause_job", &format!("id={}", job.id)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = call_server_fn(&app, &admin, "pause_job", &format!("id={}", job.id)).await;
    assert!(
        status.is_success() || status.is_redirection(),
        "{status} {body}"
    );
    let paused = queue.get_job(&job.id).await.unwrap();
    assert_eq!(paused.status, contract::JobState::Paused);
    let (_, _, html) = get(&app, &admin, &page).await;
    assert!(html.contains("data-testid=\"resume\""), "{html}");
    let (status, body) =
        call_server_fn(&app, &admin, "resume_job", &format!("id={}", job.id)).await;
    assert!(
        status.is_success() || status.is_redirection(),
        "{status} {body}"
    );
    assert_eq!(
        queue.get_job(&job.id).await.unwrap().status,
        contract::JobState::Queued
    );
    // A step added from the page: checked as at submit, a blank one named as the field.
    let (_, _, html) = get(&app, &admin, &page).await;
    assert!(html.contains("data-testid=\"add-step\""), "{html}");
    let (status, _) = call_server_fn(
        &app,
        &viewer,
        "add_step",
        &format!("id={}&instructions=x", job.id),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = call_server_fn(
        &app,
        &admin,
        "add_step",
        &format!("id={}&instructions=%20%20", job.id),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("steps[0].instructions"), "{body}");
    let (status, body) = call_server_fn(
        &app,
        &admin,
        "add_step",
        &format!("id={}&instructions=three%20%3Cb%3E", job.id),
    )
    .await;
    assert!(
        status.is_success() || status.is_redirection(),
        "{status} {body}"
    );
    let grown = queue.get_job(&job.id).await.unwrap();
    assert_eq!(
        grown.payload["task"]["steps"][2]["instructions"],
        "three <b>"
    );
    let (_, _, html) = get(&app, &admin, &page).await;
    assert!(html.contains("three &lt;b&gt;"), "{html}");
    queue
        .request_cancel(&job.id, Some("admin"), None)
        .await
        .unwrap();
    let (_, _, html) = get(&app, &admin, &page).await;
    assert!(!html.contains("data-testid=\"add-step\""), "{html}");
    assert!(html.contains("data-testid=\"retry\""), "{html}");
    assert!(html.contains("Retry from step"), "{html}");
    // Steps are numbered from 1; 0 is named as the field it is.
    let (status, body) = call_server_fn(
        &app,
        &admin,
        "retry_job",
        &format!("id={}&from_step=0", job.id),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("fromStep"), "{body}");
    let (status, body) = call_server_fn(
        &app,
        &admin,
        "retry_job",
        &format!("id={}&from_step=1", job.id),
    )
    .await;
    assert!(
        status.is_success() || status.is_redirection(),
        "{status} {body}"
    );
    assert_eq!(
        queue.get_job(&job.id).await.unwrap().status,
        contract::JobState::Queued
    );
}

#[tokio::test]
async fn an_operator_approves_or_rejects_a_job_at_the_gate_from_its_page() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let admin = session_cookie(&queue).await;
    let raw = serde_json::json!({
        "payload": { "repository": "octo/repo", "task": { "instructions": "Fix it",
            "publish": { "mode": "branch", "approval": "required" } } }
    });
    for (function, args, after) in [
        ("approve_job", String::new(), contract::JobState::Queued),
        (
            "reject_job",
            "&reason=no".to_string(),
            contract::JobState::Failed,
        ),
    ] {
        let (job, fence) = claimed_job(&queue, &raw, "w1").await;
        let patch = "diff --git a/x.txt b/x.txt\n--- a/x.txt\n+++ b/x.txt\n@@ -0,0 +1 @@\n+hello <script>alert(1)</script>\n";
        queue
            .add_artifact(
                &job.id,
                &fence,
                contract::job::task::CHANGES_PATCH,
                "text/x-diff",
                patch.as_bytes(),
            )
            .await
            .unwrap();
        queue.request_approval(&job.id, &fence).await.unwrap();
        let (_, _, html) = get(&app, &admin, &format!("/tasks/queue/{}", job.id)).await;
        // The diff is reviewed beside the buttons, as text.
        assert!(html.contains("data-testid=\"diff\""), "{html}");
        assert!(
            html.contains("+hello &lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(html.contains("data-testid=\"approve\""), "{html}");
        assert!(html.contains("data-testid=\"reject\""), "{html}");
        assert!(html.contains("Nothing is published until"), "{html}");
        let (status, body) =
            call_server_fn(&app, &admin, function, &format!("id={}{args}", job.id)).await;
        assert!(
            status.is_success() || status.is_redirection(),
            "{status} {body}"
        );
        let job = queue.get_job(&job.id).await.unwrap();
        assert_eq!(job.status, after);
        if after == contract::JobState::Queued {
            // Out of the way of the next case's claim.
            queue.request_cancel(&job.id, None, None).await.unwrap();
        }
    }
}

#[tokio::test]
async fn the_job_page_links_the_pull_request_and_names_the_branch_it_published() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "none").await;
    let admin = session_cookie(&queue).await;
    let raw = serde_json::json!({
        "payload": { "repository": "octo/repo", "task": { "instructions": "Fix it" } }
    });
    let published = |pr_url: &str| {
        serde_json::json!({
            "mode": "pr", "status": "pr_created", "branch": "task/0190-fix-it",
            "commit": "0123456789abcdef", "prUrl": pr_url,
        })
        .to_string()
    };
    let (job, fence) = claimed_job(&queue, &raw, "w1").await;
    let page = format!("/tasks/queue/{}", job.id);
    // Before publish: no card.
    let (_, _, html) = get(&app, &admin, &page).await;
    assert!(!html.contains("published-title"), "a card before publish");
    queue
        .add_artifact(
            &job.id,
            &fence,
            contract::job::task::PUBLISH_RESULT,
            "application/json",
            published("https://github.com/octo/repo/pull/7").as_bytes(),
        )
        .await
        .unwrap();
    let (status, _, html) = get(&app, &admin, &page).await;
    assert_eq!(status, StatusCode::OK);
    for shown in [
        r#"href="https://github.com/octo/repo/pull/7""#,
        r#"data-testid="pull-request""#,
        r#"<code data-testid="published-branch">task/0190-fix-it</code>"#,
        "branch pushed and pull request opened",
    ] {
        assert!(html.contains(shown), "`{shown}` is not on the job page");
    }
    queue.complete(&job.id, &fence, None).await.unwrap();

    // A worker's address that is no web address stays text, never a link.
    let (hostile, fence) = claimed_job(&queue, &raw, "w1").await;
    queue
        .add_artifact(
            &hostile.id,
            &fence,
            contract::job::task::PUBLISH_RESULT,
            "application/json",
            published("javascript:alert(1)").as_bytes(),
        )
        .await
        .unwrap();
    let (_, _, html) = get(&app, &admin, &format!("/tasks/queue/{}", hostile.id)).await;
    assert!(html.contains("javascript:alert(1)"), "the text is shown");
    assert!(!html.contains(r#"href="javascript"#), "a javascript: link");
    assert!(!html.contains(r#"data-testid="pull-request""#));
}
