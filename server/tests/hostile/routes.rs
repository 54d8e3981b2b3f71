//! Generated garbage to every REST route (read from the OpenAPI document, so a new route
//! is covered the day it is described), every server function and the login forms, with
//! every kind of credential and none.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};

use super::garbage::{Garbage, percent_encode};
use super::{Site, cases};
use stepwise::testing::site::{Backend, server_fn_url};

#[tokio::test]
async fn garbage_to_every_rest_route_is_refused_in_the_api_shape_on_sqlite() {
    rest_routes(Backend::Sqlite).await;
}

#[tokio::test]
async fn garbage_to_every_rest_route_is_refused_in_the_api_shape_on_postgres() {
    rest_routes(Backend::Postgres).await;
}

#[tokio::test]
async fn garbage_to_every_server_function_and_login_form_is_refused_on_sqlite() {
    forms(Backend::Sqlite).await;
}

#[tokio::test]
async fn garbage_to_every_server_function_and_login_form_is_refused_on_postgres() {
    forms(Backend::Postgres).await;
}

/// A route of the OpenAPI document: its method, path template and what it reads.
struct Route {
    method: String,
    path: String,
    query: Vec<String>,
    multipart: bool,
    has_body: bool,
}

async fn routes_of(site: &Site) -> Vec<Route> {
    let request = Request::get("/api/openapi.json")
        .header(header::AUTHORIZATION, format!("Bearer {}", site.admin))
        .body(Body::empty())
        .unwrap();
    let answer = site.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer}");
    let doc: Value = serde_json::from_str(&answer.body).unwrap();
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().unwrap() {
            let query = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect();
            let content = &operation["requestBody"]["content"];
            routes.push(Route {
                method: method.to_uppercase(),
                path: path.clone(),
                query,
                multipart: content.get("multipart/form-data").is_some(),
                has_body: content.is_object(),
            });
        }
    }
    routes
}

/// A body each route would accept, for garbage to break one part of.
fn valid_body(route: &Route) -> Option<Value> {
    let fence = json!({ "workerId": "w1", "attempt": 1 });
    let with = |extra: Value| {
        let mut body = fence.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let path = route.path.as_str();
    Some(match path {
        "/api/queue/jobs" => json!({
            "type": "task",
            "priority": 1,
            "maxAttempts": 2,
            "dependsOn": ["0190a000-0000-7000-8000-000000000000"],
            "payload": {
                "repository": "octo/repo",
                "task": {
                    "objective": "Fix it",
                    "runtime": { "mode": "codex", "model": "gpt-5.3-codex", "effort": "high" },
                    "publish": { "mode": "none" },
                    "steps": [{ "instructions": "one" }, { "instructions": "two" }],
                    "budget": { "maxTokens": 5000, "maxMinutes": 30 },
                },
            },
        }),
        "/api/queue/jobs/claim" => json!({
            "workerId": "w1", "capabilities": ["codex", "git"], "allowedTypes": ["task"],
            "leaseSeconds": 60, "waitSeconds": 0.1, "workerVersion": "x",
            "maxRunningPerRepository": 1,
        }),
        _ if path.ends_with("/cancel") => json!({ "reason": "stop" }),
        _ if path.ends_with("/pause") => json!({ "immediate": true }),
        _ if path.ends_with("/resume") => json!({ "checkpoint": "step-1" }),
        _ if path.ends_with("/retry") => json!({ "fromStepIndex": 1 }),
        _ if path.ends_with("/reject") => json!({ "reason": "no" }),
        _ if path.ends_with("/steps") => json!({ "steps": [{ "instructions": "more" }] }),
        _ if path.ends_with("/follow-up") => json!({ "steps": [{ "instructions": "once more" }] }),
        _ if path.ends_with("/budget") => json!({ "maxTokens": 1000, "maxMinutes": 0.5 }),
        "/api/queue/schedules" => json!({
            "name": "nightly", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
            "overlap": "skip", "catchUp": true,
            "task": { "payload": { "repository": "octo/repo", "task": { "instructions": "Hunt flaky tests" } } },
        }),
        "/api/integrations/github" => json!({
            "action": "completed",
            "repository": { "html_url": "https://github.com/octo/repo", "full_name": "octo/repo",
                            "clone_url": "https://github.com/octo/repo.git" },
            "issue": { "number": 3, "title": "Fix it", "body": "It broke.",
                       "html_url": "https://github.com/octo/repo/issues/3" },
            "label": { "name": "stepwise" },
            "comment": { "id": 11, "body": "@stepwise fix it", "user": { "login": "someone" },
                         "html_url": "https://github.com/octo/repo/issues/3#issuecomment-11" },
            "sender": { "login": "someone" },
            "check_run": { "id": 1, "name": "test", "conclusion": "failure",
                           "pull_requests": [{ "number": 7 }] },
            "pull_request": { "number": 7, "html_url": "https://github.com/octo/repo/pull/7" },
        }),
        _ if path.ends_with("/approval/request")
            || path.ends_with("/resume/patch")
            || path.ends_with("/resume/session") =>
        {
            fence.clone()
        }
        _ if path.ends_with("/heartbeat") => with(json!({ "leaseSeconds": 60 })),
        _ if path.ends_with("/complete") => with(json!({ "resultSummary": "done" })),
        _ if path.ends_with("/complete-and-claim") => with(json!({
            "resultSummary": "done",
            "claim": { "capabilities": ["codex", "git"], "leaseSeconds": 60, "waitSeconds": 0.1 },
        })),
        _ if path.ends_with("/fail") => with(json!({ "errorMessage": "broke", "retryable": true })),
        _ if path.ends_with("/events") => with(json!({
            "kind": "task.step.started", "level": "info", "message": "m",
            "payload": { "stepIndex": 0 },
        })),
        _ if path.ends_with("/ack") => fence,
        _ => return None,
    })
}

async fn rest_routes(backend: Backend) {
    let site = Site::start(backend).await;
    let routes = routes_of(&site).await;
    assert!(routes.len() >= 15, "the OpenAPI document lists every route");
    let mut garbage = Garbage::new(0x5eed_0001);
    for route in &routes {
        for _ in 0..cases() {
            let request = rest_request(&site, route, &mut garbage);
            site.send(request).await.check_refusal(backend);
        }
    }
    site.assert_alive().await;
    // The claimed job still reads as a job whatever was done to it.
    let request = Request::get(format!("/api/queue/jobs/{}", site.job_id))
        .header(header::AUTHORIZATION, format!("Bearer {}", site.viewer))
        .body(Body::empty())
        .unwrap();
    let answer = site.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer}");
    serde_json::from_str::<contract::Job>(&answer.body).unwrap();
    drop(site);
}

fn rest_request(site: &Site, route: &Route, garbage: &mut Garbage) -> Request<Body> {
    let mut path = route.path.clone();
    while let Some(start) = path.find('{') {
        let end = start + path[start..].find('}').unwrap();
        let value = match (&path[start + 1..end], garbage.below(4)) {
            ("id", 0 | 1) => site.job_id.clone(),
            ("artifact_id", 0 | 1) => site.artifact_id.clone(),
            (_, 2) => "01890000-0000-7000-8000-000000000000".to_string(),
            _ => garbage.url_text(),
        };
        // An empty segment would be another route; that one is tried on its own.
        let value = if value.is_empty() {
            "%20".into()
        } else {
            value
        };
        path.replace_range(start..=end, &value);
    }
    let mut pairs = Vec::new();
    for name in &route.query {
        if garbage.chance(70) {
            pairs.push(format!("{name}={}", garbage.url_text()));
        }
    }
    if garbage.chance(20) {
        pairs.push(format!("{}={}", garbage.url_text(), garbage.url_text()));
    }
    if !pairs.is_empty() {
        path = format!("{path}?{}", pairs.join("&"));
    }
    // Now and then a method the route does not take.
    let method = if garbage.chance(5) {
        garbage.pick(&["PUT", "DELETE", "PATCH", "GET", "POST"])
    } else {
        route.method.as_str()
    };
    let mut request = Request::builder().method(method).uri(&path);
    request = match garbage.below(8) {
        0..=1 => request.header(header::AUTHORIZATION, format!("Bearer {}", site.admin)),
        2 => request.header(header::AUTHORIZATION, format!("Bearer {}", site.viewer)),
        3..=4 => request.header(header::AUTHORIZATION, format!("Bearer {}", site.worker)),
        5 => request.header(header::AUTHORIZATION, "Bearer sw_not_a_real_token"),
        6 => request.header(header::AUTHORIZATION, "Basic YWRtaW46YWRtaW4="),
        _ => request.header(header::COOKIE, &site.admin_cookie),
    };
    if route.multipart {
        let (content_type, body) = multipart(garbage);
        return request
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap();
    }
    if !route.has_body && garbage.chance(80) {
        return request.body(Body::empty()).unwrap();
    }
    let content_type = garbage.pick(&[
        "application/json",
        "application/json",
        "application/json",
        "text/plain",
        "application/x-www-form-urlencoded",
        "",
    ]);
    if !content_type.is_empty() {
        request = request.header(header::CONTENT_TYPE, content_type);
    }
    let valid = valid_body(route);
    let body = garbage.body(valid.as_ref());
    if route.path == "/api/integrations/github" && garbage.chance(70) {
        // Signed as GitHub signs, so the garbage gets past the signature to the reading.
        let event = garbage.pick(&[
            "check_run",
            "check_suite",
            "pull_request_review",
            "pull_request",
            "ping",
            "push",
            "issues",
            "issue_comment",
            "",
        ]);
        let delivery = garbage.pick(&["72d3162e-cc78-11e3", "d-1", "", "a b", "<script>"]);
        request = request
            .header("X-GitHub-Delivery", delivery)
            .header(
                "X-Hub-Signature-256",
                testkit::github::signature(stepwise::testing::GITHUB_WEBHOOK_SECRET, &body),
            )
            .header("X-GitHub-Event", event);
    }
    request.body(Body::from(body)).unwrap()
}

/// An artifact upload: the form's fields in any order, with any values, some missing or
/// doubled, sometimes framing that never closes.
fn multipart(garbage: &mut Garbage) -> (String, Vec<u8>) {
    let boundary = "hostile-boundary-7d3f";
    let mut body = Vec::new();
    let fields = [
        "name",
        "attempt",
        "workerId",
        "contentType",
        "file",
        "stranger",
    ];
    for _ in 0..garbage.below(7) {
        let field = garbage.pick(&fields);
        let value = match (field, garbage.below(3)) {
            ("name", 0) => "logs/out.log".to_string(),
            ("attempt", 0) => "1".to_string(),
            ("workerId", 0) => "w1".to_string(),
            _ => garbage.text(),
        };
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        let filename = if field == "file" {
            format!(
                "; filename=\"{}\"",
                garbage.text().replace(['"', '\r', '\n'], "")
            )
        } else {
            String::new()
        };
        body.extend_from_slice(
            format!("Content-Disposition: form-data; name=\"{field}\"{filename}\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(value.as_bytes());
        body.extend_from_slice(b"\r\n");
    }
    if garbage.chance(80) {
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    }
    let content_type = if garbage.chance(90) {
        format!("multipart/form-data; boundary={boundary}")
    } else {
        "multipart/form-data".to_string()
    };
    (content_type, body)
}

async fn forms(backend: Backend) {
    let site = Site::start(backend).await;
    let names: Vec<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path.to_string())
        .filter(|path| path.starts_with(app::SERVER_FN_PREFIX))
        .collect();
    assert!(
        names.len() >= 7,
        "every server function is found: {names:?}"
    );
    // Spelled by the server functions' own lookup, so a renamed function fails here.
    assert!(names.contains(&server_fn_url("cancel_job")));
    let mut garbage = Garbage::new(0x5eed_0002);
    let keys = [
        "id",
        "artifact",
        "reason",
        "payload",
        "status",
        "after",
        "stranger",
        "instructions",
        "from_step",
        "now",
    ];
    for path in &names {
        for _ in 0..cases() {
            let body = if garbage.chance(85) {
                (0..garbage.below(4))
                    .map(|_| {
                        let key = garbage.pick(&keys);
                        // A real job too, so the course forms reach the queue's checks.
                        if key == "id" && garbage.chance(40) {
                            return format!("id={}", site.job_id);
                        }
                        format!("{key}={}", garbage.url_text())
                    })
                    .collect::<Vec<_>>()
                    .join("&")
                    .into_bytes()
            } else {
                garbage.body(None)
            };
            let mut request = Request::post(path.as_str())
                .header(header::HOST, "localhost")
                .header(header::ORIGIN, "http://localhost")
                .header(header::ACCEPT, "application/json");
            request = match garbage.below(3) {
                0 => request.header(header::COOKIE, &site.admin_cookie),
                1 => request.header(header::COOKIE, &site.viewer_cookie),
                _ => request,
            };
            if garbage.chance(85) {
                request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
            }
            let answer = site.send(request.body(Body::from(body)).unwrap()).await;
            answer.check_refusal(backend);
        }
    }
    for _ in 0..cases() * 4 {
        login_form(&site, &mut garbage, backend).await;
    }
    site.assert_alive().await;
    drop(site);
}

/// `POST /login` and `/logout` answer a browser: a refusal goes back to the login page,
/// and wherever `next` points, a redirect never leaves this site.
async fn login_form(site: &Site, garbage: &mut Garbage, backend: Backend) {
    let next = match garbage.below(5) {
        0 => "//evil.example/x".to_string(),
        1 => "https://evil.example/".to_string(),
        2 => "/\\evil.example".to_string(),
        // A browser drops tabs and line breaks from a URL: this is `//evil.example`.
        3 => "/\t/evil.example".to_string(),
        _ => garbage.text(),
    };
    let token = match garbage.below(4) {
        0 => site.admin.clone(),
        1 => site.worker.clone(),
        _ => garbage.text(),
    };
    let body = if garbage.chance(85) {
        format!(
            "token={}&next={}",
            percent_encode(token.as_bytes()),
            percent_encode(next.as_bytes())
        )
        .into_bytes()
    } else {
        garbage.body(None)
    };
    let path = garbage.pick(&["/login", "/login", "/logout"]);
    let mut request = Request::post(path)
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if garbage.chance(80) {
        request = request.header(header::ORIGIN, "http://localhost");
    }
    if garbage.chance(30) {
        request = request.header(header::COOKIE, &site.admin_cookie);
    }
    let answer = site.send(request.body(Body::from(body)).unwrap()).await;
    answer.check_refusal(backend);
    // Every redirect names a path on this site, in visible ASCII only (a browser would drop
    // a tab or line break and could land elsewhere).
    if answer.status.is_redirection() {
        let location = answer
            .headers
            .get(header::LOCATION)
            .map(|l| l.as_bytes())
            .unwrap_or_default();
        let shown = String::from_utf8_lossy(location);
        assert!(
            location.starts_with(b"/")
                && !location.starts_with(b"//")
                && !location.starts_with(b"/\\")
                && location.iter().all(|b| (0x21..=0x7e).contains(b)),
            "{backend:?}: a redirect off the site, or to nowhere: {shown:?}: {answer}"
        );
    }
}
