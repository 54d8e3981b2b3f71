//! The schedules' routes: made, listed, read, paused, resumed and deleted by an operator;
//! read but not changed by a viewer; a bad cron or time zone a 422 naming the field; an
//! unknown id a 404; every route refuses a request without a token.

use axum::http::{Method, StatusCode};
use queue::Role;
use serde_json::json;

use crate::api;

fn request(name: &str) -> serde_json::Value {
    json!({
        "name": name,
        "cron": "0 6 * * 1",
        "timezone": "Europe/Berlin",
        "task": { "payload": { "repository": "octo/hello", "task": { "instructions": "Update the dependencies" } } },
    })
}

#[tokio::test]
async fn an_operator_makes_pauses_resumes_and_deletes_a_schedule() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    let viewer = api.user(Role::Viewer).await;
    let (status, made) = api
        .call(
            Method::POST,
            "/api/queue/schedules",
            Some(&operator),
            Some(request("deps")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        (made["overlap"].as_str(), made["catchUp"].as_bool()),
        (Some("skip"), Some(false))
    );
    let next = chrono::DateTime::parse_from_rfc3339(made["nextAt"].as_str().unwrap()).unwrap();
    // Monday, 06:00 in Berlin.
    let local = next.with_timezone(&chrono_tz::Europe::Berlin);
    assert_eq!(local.format("%a %H:%M").to_string(), "Mon 06:00");
    let id = made["id"].as_str().unwrap();

    let (status, list) = api
        .call(Method::GET, "/api/queue/schedules", Some(&viewer), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let uri = format!("/api/queue/schedules/{id}");
    let (status, shown) = api.call(Method::GET, &uri, Some(&viewer), None).await;
    assert_eq!((status, &shown), (StatusCode::OK, &made));
    // A viewer reads, and changes nothing.
    let (status, _) = api
        .call(Method::POST, &format!("{uri}/pause"), Some(&viewer), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = api
        .call(
            Method::POST,
            "/api/queue/schedules",
            Some(&viewer),
            Some(request("other")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, paused) = api
        .call(Method::POST, &format!("{uri}/pause"), Some(&operator), None)
        .await;
    assert_eq!(
        (status, paused["paused"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    let (status, resumed) = api
        .call(
            Method::POST,
            &format!("{uri}/resume"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(
        (status, resumed["paused"].as_bool()),
        (StatusCode::OK, Some(false))
    );
    let (status, _) = api.call(Method::DELETE, &uri, Some(&operator), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, gone) = api.call(Method::GET, &uri, Some(&operator), None).await;
    assert_eq!(
        (status, gone["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("schedule_not_found"))
    );
    let (status, _) = api
        .call(
            Method::POST,
            "/api/queue/schedules/not-an-id/pause",
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_bad_cron_or_time_zone_is_a_422_naming_the_field() {
    let api = api().await;
    let operator = api.user(Role::Operator).await;
    for (field, value, named) in [
        ("cron", json!("0 6 * *"), "cron"),
        ("cron", json!("99 6 * * 1"), "cron"),
        ("timezone", json!("Europe/Atlantis"), "timezone"),
        ("overlap", json!("sometimes"), "overlap"),
        (
            "task",
            json!({ "payload": { "repository": "octo/hello" } }),
            "task.task",
        ),
        (
            "task",
            json!({ "payload": { "repository": "octo/hello", "source": {}, "task": { "instructions": "x" } } }),
            "task.payload.source",
        ),
    ] {
        let mut body = request("deps");
        body[field] = value;
        let (status, answer) = api
            .call(
                Method::POST,
                "/api/queue/schedules",
                Some(&operator),
                Some(body),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}: {answer}"
        );
        let paths: Vec<&str> = answer["errors"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["path"].as_str())
            .collect();
        assert!(paths.contains(&named), "{field}: {answer}");
    }
    let (status, _) = api
        .call(
            Method::POST,
            "/api/queue/schedules",
            Some(&operator),
            Some(request("deps")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, taken) = api
        .call(
            Method::POST,
            "/api/queue/schedules",
            Some(&operator),
            Some(request("deps")),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(taken["errors"][0]["path"], "name");
}

#[tokio::test]
async fn every_schedule_route_refuses_a_request_without_a_token() {
    let api = api().await;
    let id = "0190a000-0000-7000-8000-000000000000";
    for (method, uri) in [
        (Method::POST, "/api/queue/schedules".to_string()),
        (Method::GET, "/api/queue/schedules".to_string()),
        (Method::GET, format!("/api/queue/schedules/{id}")),
        (Method::DELETE, format!("/api/queue/schedules/{id}")),
        (Method::POST, format!("/api/queue/schedules/{id}/pause")),
        (Method::POST, format!("/api/queue/schedules/{id}/resume")),
    ] {
        let (status, body) = api.call(method.clone(), &uri, None, Some(json!({}))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri}: {body}");
    }
}
