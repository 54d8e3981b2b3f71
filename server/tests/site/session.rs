//! The dashboard's login: the gate, logging in and out, login codes, and where a login
//! may send the browser next.

use axum::body::Body;
use axum::http::header::{HOST, LOCATION, ORIGIN, SET_COOKIE};
use axum::http::{HeaderMap, Request, StatusCode, header};
use queue::TokenKind;
use stepwise::http::auth::{Scope, bootstrap_admin, mint};
use stepwise::http::session::login_url;
use stepwise::testing::site::{send, session_cookie, test_site};

const HOST_NAME: &str = "127.0.0.1:3000";
const ORIGIN_URL: &str = "http://127.0.0.1:3000";

fn login_post(token: &str, origin: &str) -> Request<Body> {
    Request::post("/login")
        .header(HOST, HOST_NAME)
        .header(ORIGIN, origin)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!(
            "token={token}&next=%2Ftasks%2Fqueue%3Fstatus%3Dqueued"
        )))
        .unwrap()
}

/// The `name=value` part of a Set-Cookie answer.
fn cookie_of(headers: &HeaderMap) -> String {
    let set = headers[SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn a_page_without_a_session_sends_the_browser_to_log_in() {
    let site = tempfile::tempdir().unwrap();
    let (app, _) = test_site(site.path(), "pr").await;
    let (status, headers, _) = send(
        &app,
        Request::get("/tasks/queue?status=queued")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        headers[LOCATION],
        "/login?next=/tasks/queue%3Fstatus%3Dqueued"
    );
    let (status, _, html) = send(&app, Request::get("/login").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("User token"), "{html}");
    // A server function is not a page: no redirect, a plain refusal.
    let (status, _, _) = send(
        &app,
        Request::post("/api/get_settings")
            .header(ORIGIN, ORIGIN_URL)
            .header(HOST, HOST_NAME)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_next_that_hides_a_tab_or_line_break_stays_on_this_site() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let admin = bootstrap_admin(&queue).await.unwrap().unwrap();
    // A browser drops tabs and line breaks from a URL: sent as is, each of these
    // would land on //evil.example, another site.
    for (next, expected) in [
        ("%2F%09%2Fevil.example", "/%09/evil.example"),
        ("%2F%0A%2Fevil.example", "/%0A/evil.example"),
        ("%2F%F0%9F%92%A3", "/%F0%9F%92%A3"),
    ] {
        let request = Request::post("/login")
            .header(HOST, HOST_NAME)
            .header(ORIGIN, ORIGIN_URL)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={admin}&next={next}")))
            .unwrap();
        let (status, headers, _) = send(&app, request).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        assert_eq!(headers[LOCATION], expected);
    }
}

#[tokio::test]
async fn logging_in_with_a_user_token_sets_an_http_only_strict_cookie() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let admin = bootstrap_admin(&queue).await.unwrap().unwrap();
    let (status, headers, _) = send(&app, login_post(&admin, ORIGIN_URL)).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[LOCATION], "/tasks/queue?status=queued");
    let set = headers[SET_COOKIE].to_str().unwrap();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=604800"] {
        assert!(set.contains(part), "{set} lacks {part}");
    }
    assert!(
        !set.contains(&admin),
        "the cookie must not be the token itself"
    );
    let cookie = cookie_of(&headers);
    let (status, _, html) = send(
        &app,
        Request::get("/tasks/queue")
            .header(header::COOKIE, &cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    // The same cookie reads the REST API, which the dashboard's own scripts call.
    let (status, _, body) = send(
        &app,
        Request::get("/api/queue/jobs")
            .header(header::COOKIE, &cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_login_that_fails_says_why_and_sets_no_cookie() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let admin = bootstrap_admin(&queue).await.unwrap().unwrap();
    let worker = mint("w", TokenKind::Worker, Scope::any_worker()).unwrap();
    queue.create_token(worker.record).await.unwrap();
    for (request, error) in [
        (login_post("swu_nope", ORIGIN_URL), "invalid"),
        (login_post(&worker.secret, ORIGIN_URL), "worker"),
        (login_post("", ORIGIN_URL), "empty"),
        (login_post(&admin, "http://evil.example"), "origin"),
        (login_post(&admin, "http://127.0.0.1:4000"), "origin"),
    ] {
        let (status, headers, _) = send(&app, request).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        let location = headers[LOCATION].to_str().unwrap();
        assert!(
            location.starts_with(&format!("/login?error={error}&")),
            "{location}"
        );
        assert!(headers.get(SET_COOKIE).is_none(), "{error}");
    }
}

#[tokio::test]
async fn the_printed_login_link_works_once() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    assert_eq!(
        login_url(&queue, ORIGIN_URL).await.unwrap(),
        format!("{ORIGIN_URL}/login"),
        "with no admin token there is nothing to log in as"
    );
    bootstrap_admin(&queue).await.unwrap().unwrap();
    let url = login_url(&queue, ORIGIN_URL).await.unwrap();
    let path = url.strip_prefix(ORIGIN_URL).unwrap().to_string();
    assert!(path.starts_with("/login?code=swl_"), "{path}");
    let (status, headers, _) = send(&app, Request::get(&path).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[LOCATION], "/tasks/queue");
    let cookie = cookie_of(&headers);
    assert!(cookie.starts_with("stepwise_session=sws_"), "{cookie}");
    let (status, headers, _) = send(&app, Request::get(&path).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        headers[LOCATION]
            .to_str()
            .unwrap()
            .starts_with("/login?error=code")
    );
    assert!(headers.get(SET_COOKIE).is_none());
}

#[tokio::test]
async fn a_write_with_the_session_cookie_must_come_from_our_own_pages() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let cookie = session_cookie(&queue).await;
    let cancel = |origin: Option<&str>| {
        let mut request =
            Request::post("/api/queue/jobs/0190f0f0-0000-7000-8000-000000000000/cancel")
                .header(HOST, HOST_NAME)
                .header(header::COOKIE, &cookie)
                .header(header::CONTENT_TYPE, "application/json");
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        request.body(Body::from("{}")).unwrap()
    };
    let (status, _, body) = send(&app, cancel(None)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _, body) = send(&app, cancel(Some("http://127.0.0.1:4000"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // From our own origin it reaches the handler, which finds no such job.
    let (status, _, body) = send(&app, cancel(Some(ORIGIN_URL))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test]
async fn logging_out_ends_the_session() {
    let site = tempfile::tempdir().unwrap();
    let (app, queue) = test_site(site.path(), "pr").await;
    let cookie = session_cookie(&queue).await;
    let (status, headers, _) = send(
        &app,
        Request::post("/logout")
            .header(HOST, HOST_NAME)
            .header(ORIGIN, ORIGIN_URL)
            .header(header::COOKIE, &cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(headers[SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    let (status, _, _) = send(
        &app,
        Request::get("/tasks/queue")
            .header(header::COOKIE, &cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "the old cookie must open nothing"
    );
}
