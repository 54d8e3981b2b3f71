//! A worker's own limit of running jobs per repository, as its claim sends it.

use super::*;

#[tokio::test]
async fn a_worker_s_repository_limit_is_1_or_more_and_a_bad_one_is_named() {
    let api = api().await;
    let admin = api.user(Role::Admin).await;
    let worker = api.worker("w1").await;
    api.submit(&admin, "none").await;
    for (limit, field) in [(json!(0), "maxRunningPerRepository"), (json!(-1), "")] {
        let body = json!({ "capabilities": ALL_CAPS, "maxRunningPerRepository": limit });
        let (status, answer) = api
            .call(
                Method::POST,
                "/api/queue/jobs/claim",
                Some(&worker),
                Some(body),
            )
            .await;
        assert!(status.is_client_error(), "{limit}: {status} {answer}");
        assert!(answer.to_string().contains(field), "{limit}: {answer}");
    }
    let body = json!({ "capabilities": ALL_CAPS, "maxRunningPerRepository": 1 });
    let (status, claimed) = api
        .call(
            Method::POST,
            "/api/queue/jobs/claim",
            Some(&worker),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{claimed}");
    assert!(claimed["job"]["id"].is_string(), "{claimed}");
}
