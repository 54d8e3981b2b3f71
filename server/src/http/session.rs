//! The dashboard's login: a user token traded for an HttpOnly, SameSite=Strict session
//! cookie, one-time login codes for the URL `stepwise serve` prints, and the gate that sends
//! a browser without a session to the login page.

use std::time::Duration;

use axum::Router;
use axum::extract::{Form, Request, State};
use axum::http::header::{COOKIE, HOST, LOCATION, ORIGIN, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use queue::{Queue, SessionPurpose, TokenKind, TokenRecord};
use serde::Deserialize;

use super::error::ApiError;
use super::secret::{hash, random_secret};
use super::state::AppState;

/// The cookie that holds a session's secret. The browser never lets scripts read it
/// (HttpOnly) and never sends it with a request another site started (SameSite=Strict).
pub const COOKIE_NAME: &str = "stepwise_session";
/// How long a login lasts: long enough not to nag someone who uses the dashboard daily.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long the login URL that `serve` prints stays usable (once).
pub const LOGIN_CODE_TTL: Duration = Duration::from_secs(15 * 60);

const SESSION_PREFIX: &str = "sws_";
const LOGIN_CODE_PREFIX: &str = "swl_";

/// Why a login failed, as the `error` the login page is sent back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoginError {
    /// The token is unknown or revoked.
    Invalid,
    /// A worker token: it runs jobs, it does not log in.
    WorkerToken,
    /// The login link was used already or is older than its lifetime.
    CodeUsed,
    /// The form was posted from another origin.
    CrossOrigin,
    Empty,
}

impl LoginError {
    fn as_str(self) -> &'static str {
        match self {
            LoginError::Invalid => "invalid",
            LoginError::WorkerToken => "worker",
            LoginError::CodeUsed => "code",
            LoginError::CrossOrigin => "origin",
            LoginError::Empty => "empty",
        }
    }
}

/// A fresh secret that stands for `token` (stored as its hash) for `ttl`.
async fn issue(
    queue: &Queue,
    token: &TokenRecord,
    purpose: SessionPurpose,
    ttl: Duration,
) -> Result<String, ApiError> {
    let prefix = match purpose {
        SessionPurpose::Session => SESSION_PREFIX,
        SessionPurpose::Login => LOGIN_CODE_PREFIX,
    };
    let secret = random_secret(prefix)?;
    queue
        .create_session(&token.id, purpose, &hash(&secret), ttl)
        .await?;
    Ok(secret)
}

/// A one-time code that logs `token` in, for the URL printed at start-up.
pub async fn mint_login_code(queue: &Queue, token: &TokenRecord) -> Result<String, ApiError> {
    issue(queue, token, SessionPurpose::Login, LOGIN_CODE_TTL).await
}

/// The login URL `serve` prints: a one-time code for the oldest live admin token, or the
/// bare login page when there is none (then a person logs in by pasting a token).
pub async fn login_url(queue: &Queue, base: &str) -> Result<String, ApiError> {
    let admin = queue
        .list_tokens()
        .await?
        .into_iter()
        .filter(|t| t.revoked_at.is_none() && t.role == Some(queue::Role::Admin))
        .min_by_key(|t| t.created_at);
    match admin {
        Some(admin) => Ok(format!(
            "{base}/login?code={}",
            mint_login_code(queue, &admin).await?
        )),
        None => Ok(format!("{base}/login")),
    }
}

/// The session secret a request carries in its cookie, if any.
pub fn cookie_secret(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
}

/// Whether a request that changes something came from one of our own pages. A session
/// cookie rides along with any request the browser makes to this host, so a write made
/// with one must prove its origin: SameSite=Strict alone does not stop another port of
/// the same host, which counts as the same site.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        return authority.is_some() && authority == host;
    }
    headers
        .get("sec-fetch-site")
        .is_some_and(|site| site == "same-origin")
}

/// Methods that only read, which a cookie may make from anywhere on our pages.
pub fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The user token behind the request's session cookie, refusing a write that did not come
/// from our own origin. `Ok(None)` when there is no live session.
pub async fn session_token(
    queue: &Queue,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Option<TokenRecord>, ApiError> {
    let Some(secret) = cookie_secret(headers) else {
        return Ok(None);
    };
    let Some(token) = queue.find_session(&hash(secret)).await? else {
        return Ok(None);
    };
    if !is_safe(method) && !same_origin(headers) {
        return Err(ApiError::forbidden(
            "a request made with the session cookie must come from this site's own pages",
        ));
    }
    Ok(Some(token))
}

fn set_cookie(secret: &str, max_age: Duration) -> HeaderValue {
    let value = format!(
        "{COOKIE_NAME}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        max_age.as_secs()
    );
    HeaderValue::from_str(&value).expect("a hex secret is a valid header value")
}

/// A redirect to `location`, a path on this site. Every byte that is not visible ASCII is
/// percent-encoded: a header cannot carry it as text, and a browser drops tabs and line
/// breaks from a URL, so `/<TAB>/evil.example` would otherwise arrive as `//evil.example`,
/// another site.
fn see_other(location: &str) -> Response {
    let encoded: String = location
        .bytes()
        .map(|b| match b {
            0x21..=0x7e => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let mut response = StatusCode::SEE_OTHER.into_response();
    let value = HeaderValue::from_str(&encoded).expect("visible ASCII is a valid header value");
    response.headers_mut().insert(LOCATION, value);
    response
}

/// Where to go after logging in: only a path on this site, so a crafted login link cannot
/// send someone elsewhere.
fn local_path(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n,
        _ => "/tasks/queue",
    }
}

fn back_to_login(error: LoginError, next: Option<&str>) -> Response {
    let next = local_path(next);
    let query = url_encode(next);
    see_other(&format!("/login?error={}&next={query}", error.as_str()))
}

fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Opens a session for `token` and answers with its cookie and a redirect to `next`.
async fn start_session(
    queue: &Queue,
    token: &TokenRecord,
    next: Option<&str>,
) -> Result<Response, ApiError> {
    let secret = issue(queue, token, SessionPurpose::Session, SESSION_TTL).await?;
    let mut response = see_other(local_path(next));
    response
        .headers_mut()
        .insert(SET_COOKIE, set_cookie(&secret, SESSION_TTL));
    Ok(response)
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
    next: Option<String>,
}

/// `POST /login`: the login page's form. Works without JavaScript.
async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, ApiError> {
    let next = form.next.as_deref();
    if !same_origin(&headers) {
        return Ok(back_to_login(LoginError::CrossOrigin, next));
    }
    let token = form.token.trim();
    if token.is_empty() {
        return Ok(back_to_login(LoginError::Empty, next));
    }
    match state.queue.find_token_by_hash(&hash(token)).await? {
        None => Ok(back_to_login(LoginError::Invalid, next)),
        Some(t) if t.kind != TokenKind::User => Ok(back_to_login(LoginError::WorkerToken, next)),
        Some(t) => start_session(&state.queue, &t, next).await,
    }
}

/// `POST /logout`: ends the session and clears the cookie.
async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if !same_origin(&headers) {
        return Err(ApiError::forbidden(
            "log out from this site's own pages: the request came from another origin",
        ));
    }
    if let Some(secret) = cookie_secret(&headers) {
        state.queue.end_session(&hash(secret)).await?;
    }
    let mut response = see_other("/login");
    response
        .headers_mut()
        .insert(SET_COOKIE, set_cookie("", Duration::ZERO));
    Ok(response)
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/login", post(login))
        .route("/logout", post(logout))
}

/// Paths anyone may load: the login page and the files it needs.
fn is_public(path: &str) -> bool {
    path == "/login" || path.starts_with("/pkg/") || path == "/favicon.svg"
}

/// In front of every page and server function: a browser without a live session is sent
/// to the login page (a non-page request gets 401); `GET /login?code=…` trades a login
/// code for a session. The REST API under `/api/queue` authenticates on its own.
pub async fn gate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path.starts_with("/api/queue/") || path == "/api/queue" {
        return next.run(request).await;
    }
    if path == "/login"
        && request.method() == Method::GET
        && let Some(code) = query_param(request.uri().query(), "code")
    {
        return match state.queue.redeem_login_code(&hash(&code)).await {
            Ok(Some(token)) => start_session(&state.queue, &token, None)
                .await
                .unwrap_or_else(IntoResponse::into_response),
            Ok(None) => back_to_login(LoginError::CodeUsed, None),
            Err(e) => ApiError::from(e).into_response(),
        };
    }
    if is_public(path) {
        return next.run(request).await;
    }
    match session_token(&state.queue, request.method(), request.headers()).await {
        Ok(Some(token)) => {
            let mut request = request;
            request.extensions_mut().insert(token);
            next.run(request).await
        }
        Ok(None) if request.method() == Method::GET || request.method() == Method::HEAD => {
            let wanted = request
                .uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/");
            see_other(&format!("/login?next={}", url_encode(wanted)))
        }
        Ok(None) => {
            ApiError::unauthorized("log in first: this needs a dashboard session").into_response()
        }
        Err(e) => e.into_response(),
    }
}

fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_login_only_a_path_on_this_site_is_followed() {
        assert_eq!(local_path(Some("/tasks/queue/1")), "/tasks/queue/1");
        for bad in ["//evil.example", "https://evil.example", "/\\evil", "evil"] {
            assert_eq!(local_path(Some(bad)), "/tasks/queue", "{bad}");
        }
    }
}
