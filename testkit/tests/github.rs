//! The scripted GitHub API answers in GitHub's shapes, only with the token, and signs its
//! deliveries as GitHub documents (the example of "Validating webhook deliveries").

use serde_json::{Value, json};
use testkit::github::{GitHub, delivery, signature};

async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(2))
        .build()
        .unwrap();
    let mut request = client
        .get(url)
        .header("Accept", "application/vnd.github+json");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn it_answers_pulls_checks_logs_and_reviews_with_the_token_only() {
    let gh = GitHub::start("ghs_token").await;
    let api = gh.url();
    gh.open_pull("octo", "hello", 7, "stepwise/fix", "aaa111");
    let failed = gh.add_check_run(
        "aaa111",
        "test",
        Some("failure"),
        "line 1\nassertion failed\n",
    );
    gh.add_check_run("bbb222", "test", Some("success"), "");
    let review = gh.add_review(
        7,
        "mona",
        "CHANGES_REQUESTED",
        "Please rename it.",
        &[("src/lib.rs", 12, "Call it `greet`.")],
    );

    let (status, body) = get(&format!("{api}/repos/octo/hello/pulls/7"), None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Bad credentials"));

    let (status, body) = get(
        &format!("{api}/repos/octo/hello/pulls/7"),
        Some("ghs_token"),
    )
    .await;
    assert_eq!(status, 200);
    let pull: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        pull["head"],
        json!({ "ref": "stepwise/fix", "sha": "aaa111" })
    );

    let (_, body) = get(
        &format!("{api}/repos/octo/hello/commits/aaa111/check-runs"),
        Some("ghs_token"),
    )
    .await;
    let runs: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(runs["total_count"], 1);
    assert_eq!(runs["check_runs"][0]["conclusion"], "failure");
    assert_eq!(runs["check_runs"][0]["status"], "completed");

    // The logs come by a redirect, as GitHub Actions serves them.
    let (status, log) = get(
        &format!("{api}/repos/octo/hello/actions/jobs/{failed}/logs"),
        Some("ghs_token"),
    )
    .await;
    assert_eq!((status, log.as_str()), (200, "line 1\nassertion failed\n"));

    let (_, body) = get(
        &format!("{api}/repos/octo/hello/pulls/7/reviews"),
        Some("ghs_token"),
    )
    .await;
    let reviews: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reviews[0]["state"], "CHANGES_REQUESTED");
    assert_eq!(reviews[0]["commit_id"], "aaa111");
    let (_, body) = get(
        &format!("{api}/repos/octo/hello/pulls/7/reviews/{review}/comments"),
        Some("ghs_token"),
    )
    .await;
    let comments: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(comments[0]["path"], "src/lib.rs");
    assert_eq!(comments[0]["line"], 12);

    let (status, _) = get(
        &format!("{api}/repos/octo/hello/pulls/8"),
        Some("ghs_token"),
    )
    .await;
    assert_eq!(status, 404);
    assert!(
        gh.requests()
            .contains(&"GET /repos/octo/hello/pulls/7".to_string())
    );

    let event = gh.review_event(review);
    assert_eq!(
        event["review"]["state"], "changes_requested",
        "lowercase in webhooks"
    );
    assert_eq!(event["pull_request"]["number"], 7);
    let event = gh.check_run_event(failed);
    assert_eq!(event["check_run"]["pull_requests"][0]["number"], 7);
}

#[test]
fn a_delivery_is_signed_as_github_documents() {
    // The values of GitHub's "Validating webhook deliveries".
    assert_eq!(
        signature("It's a Secret to Everybody", b"Hello, World!"),
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    );
    let payload = json!({ "zen": "Keep it logically awesome." });
    let signed = delivery("ping", "d-1", &payload, "s3cret");
    let header = |name: &str| {
        signed
            .headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(header("X-GitHub-Event"), "ping");
    assert_eq!(header("X-GitHub-Delivery"), "d-1");
    assert_eq!(
        header("X-Hub-Signature-256"),
        signature("s3cret", &signed.body)
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&signed.body).unwrap(),
        payload
    );
}
