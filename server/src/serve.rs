//! `stepwise serve`: the whole site (API, login, pages, server functions) on one router,
//! and the test fixtures that build it. Past 500 lines by those fixtures and tests; issue
//! 16 splits the server into `http/` and `cli/` with its tests out of `src/`.

use axum::Router;
use axum::response::Redirect;
use axum::routing::get;
use leptos::prelude::*;
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use tower_http::trace::TraceLayer;

use crate::api::{self, AppState, Limits};
use crate::cli::{CliError, DbArgs};
use crate::config::Config;
use tokio_util::sync::CancellationToken;
use worker::runner::Shutdown;

/// A line for the person who started the server. A closed stdout (a supervisor that drops
/// it, a reader that stopped reading) must not bring the server down, as `println!` would.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Opens the database, builds the router and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), CliError> {
    let queue = open_queue(&config.db, config.settings.defaults.clone()).await?;
    let admin = crate::auth::bootstrap_admin(&queue)
        .await
        .map_err(CliError::Bootstrap)?;
    let stop = tokio_util::sync::CancellationToken::new();
    let rescuer =
        queue::Rescuer::new(queue.clone(), queue::RescuerConfig::default()).start(stop.clone());

    // Stops the HTTP server; its streams end at once (the rest drains gracefully).
    let http_stop = CancellationToken::new();
    let app = router(&config, queue.clone(), Limits::default(), http_stop.clone());
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| CliError::Bind {
            addr: config.addr.to_string(),
            source,
        })?;
    let local = listener.local_addr().map_err(CliError::Serve)?;
    // Printed, not logged: these are the lines a person looks for, and a log must never
    // hold a secret. The admin token is shown this once.
    if let Some(secret) = admin {
        say!("created the first admin token (shown only now; keep it): {secret}");
        say!("use it as `Authorization: Bearer <token>`; make more with `stepwise token create`");
    }
    let base = base_url(local);
    let login = crate::session::login_url(&queue, &base)
        .await
        .map_err(CliError::Bootstrap)?;
    let minutes = crate::session::LOGIN_CODE_TTL.as_secs() / 60;
    say!("stepwise is running on {base}");
    if login.contains("?code=") {
        say!("log in to the dashboard (this link works once, for {minutes} minutes): {login}");
    } else {
        say!("log in to the dashboard with a user token: {login}");
    }
    let worker = Shutdown::default();
    let embedded = match config.worker.clone() {
        Some(agent) => Some(
            crate::worker_cli::start_embedded(
                &queue,
                &base,
                local.port(),
                &config.db.data_dir,
                agent,
                worker.clone(),
            )
            .await?,
        ),
        None => None,
    };
    // The embedded worker talks to this server over HTTP, so the server stays up until the
    // worker has drained (or handed back) its jobs; a second signal hands them back at once.
    tokio::spawn({
        let http_stop = http_stop.clone();
        async move {
            shutdown_signal().await;
            worker.stop.cancel();
            if let Some(embedded) = embedded {
                tokio::select! {
                    _ = embedded => {}
                    _ = async {
                        shutdown_signal().await;
                        worker.hand_back.cancel();
                        std::future::pending::<()>().await
                    } => {}
                }
            }
            http_stop.cancel();
        }
    });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(http_stop.cancelled_owned())
        .await;
    stop.cancel();
    let _ = rescuer.await;
    served.map_err(CliError::Serve)
}

/// The queue over the configured database, migrated.
pub async fn open_queue(
    db_args: &DbArgs,
    defaults: contract::Defaults,
) -> Result<queue::Queue, CliError> {
    let db = match &db_args.database_url {
        Some(url) => queue::Database::open_url(url).await?,
        None => queue::Database::open_data_dir(&db_args.data_dir).await?,
    };
    tracing::info!(backend = db.backend(), data_dir = %db_args.data_dir.display(), "database ready");
    let mut queue_config = queue::QueueConfig::new(db_args.data_dir.join("artifacts"));
    queue_config.defaults = defaults;
    let queue = queue::Queue::open(db, queue_config).await?;
    queue.migrate().await?;
    Ok(queue)
}

/// Where a person on this machine reaches a listener: a wildcard bind is reached on loopback.
fn base_url(local: std::net::SocketAddr) -> String {
    let ip = match local.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => std::net::Ipv4Addr::LOCALHOST.into(),
        ip if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, local.port()))
}

/// The dashboard's routes, generated once per process. Generating them runs the app with a
/// process-wide flag set that parks, for good, any resource first polled meanwhile
/// (leptos issue 4773): a page rendered beside a second generation could hang forever,
/// which tests that each built a router did in about one run of 40. Every render goes through
/// a router built after this returned, so none can overlap the one generation.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<AxumRouteListing>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(app::App)).clone()
}

fn router(
    config: &Config,
    queue: queue::Queue,
    limits: Limits,
    closing: CancellationToken,
) -> Router {
    let max_artifact_bytes = queue.config().max_artifact_bytes;
    let state = AppState {
        queue,
        limits,
        closing,
    };
    let api = api::router(max_artifact_bytes).with_state(state.clone());
    let login = crate::session::router().with_state(state.clone());
    let options = LeptosOptions::builder()
        .output_name("stepwise")
        .site_root(config.site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(config.addr)
        .env(leptos::config::Env::PROD)
        .build();
    let routes = page_routes();
    let settings = config.settings.clone();
    let skills_dir = config.skills_dir.clone();
    let skills = app::SkillCatalog(std::sync::Arc::new(move || {
        worker::workspace::installed_skills(&skills_dir)
            .into_iter()
            .map(|s| app::SkillInfo {
                id: s.id,
                description: s.description,
                required_capabilities: s.required_capabilities,
            })
            .collect()
    }));
    // Pages and server functions reach the one queue service through the context.
    let queue = state.queue.clone();
    Router::new()
        // A real redirect, so it works without JavaScript and for curl.
        .route("/", get(|| async { Redirect::temporary("/tasks/queue") }))
        .leptos_routes_with_context(
            &options,
            routes,
            move || {
                provide_context(settings.clone());
                provide_context(skills.clone());
                provide_context(queue.clone());
            },
            {
                let options = options.clone();
                move || app::shell(options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler(app::shell))
        .layer(axum::middleware::map_response(server_fn_status))
        .with_state(options)
        .merge(login)
        .layer(axum::middleware::from_fn_with_state(
            state,
            crate::session::gate,
        ))
        .merge(api)
        // The span names the path only: a query may carry a login code.
        .layer(
            TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
                tracing::debug_span!(
                    "request",
                    method = %request.method(),
                    path = %request.uri().path()
                )
            }),
        )
}

/// A server function's error leaves server_fn as a 500 whatever it was (arguments that
/// do not parse included, before our code runs). Its body is the API's `ErrorBody`, and
/// its code gives the status REST answers the same error with.
async fn server_fn_status(response: axum::response::Response) -> axum::response::Response {
    use leptos::server_fn::error::SERVER_FN_ERROR_HEADER;
    if response.status() != axum::http::StatusCode::INTERNAL_SERVER_ERROR
        || !response.headers().contains_key(SERVER_FN_ERROR_HEADER)
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, 1 << 20).await {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::error!(%error, "a server function's error could not be read");
            axum::body::Bytes::new()
        }
    };
    match serde_json::from_slice::<contract::api::ErrorBody>(&bytes) {
        Ok(error) => {
            let code = error.error_code();
            if code.is_internal() {
                tracing::error!(code = %code, error = %error, "server function failed");
            }
            parts.status = axum::http::StatusCode::from_u16(code.status())
                .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        }
        Err(_) => tracing::error!("a server function's error is not an ErrorBody"),
    }
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = terminate => {} }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod usage_pages;

#[cfg(test)]
pub(crate) mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode, header};
    use std::time::Duration;
    use tower::ServiceExt;

    use super::*;
    use crate::cli::ServeArgs;

    /// The whole router over a fresh SQLite database in `site`, and its queue.
    pub(crate) async fn test_site(
        site: &std::path::Path,
        publish: &'static str,
    ) -> (Router, queue::Queue) {
        test_site_on(site, publish, None).await
    }

    /// Which database a test site runs on.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Backend {
        Sqlite,
        Postgres,
    }

    /// A throw-away database of `backend` for one test: the SQLite file lives in the site;
    /// a PostgreSQL one is created on the server of `STEPWISE_TEST_PG_URL` and dropped when
    /// this is (on failure too).
    pub(crate) struct TestDb {
        pub url: Option<String>,
        pg: Option<queue::ScratchPostgres>,
    }

    impl TestDb {
        pub(crate) async fn new(backend: Backend) -> TestDb {
            match backend {
                Backend::Sqlite => TestDb {
                    url: None,
                    pg: None,
                },
                Backend::Postgres => {
                    let admin = std::env::var("STEPWISE_TEST_PG_URL").unwrap_or_else(|_| {
                        "postgres://postgres@127.0.0.1:5432/postgres".to_string()
                    });
                    let pg = queue::ScratchPostgres::create(&admin, "stepwise_srv")
                        .await
                        .unwrap_or_else(|e| {
                            panic!("PostgreSQL at STEPWISE_TEST_PG_URL is needed: {e}")
                        });
                    TestDb {
                        url: Some(pg.url().to_string()),
                        pg: Some(pg),
                    }
                }
            }
        }
    }

    impl Drop for TestDb {
        fn drop(&mut self) {
            if let Some(pg) = self.pg.take() {
                // Drop runs inside a runtime in tests; a thread of its own may block.
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a runtime");
                    if let Err(e) = runtime.block_on(pg.drop_database()) {
                        eprintln!("could not drop a test database: {e}");
                    }
                })
                .join();
            }
        }
    }

    /// [`test_site`] on the database at `database_url` (SQLite in the site when `None`).
    pub(crate) async fn test_site_on(
        site: &std::path::Path,
        publish: &'static str,
        database_url: Option<&str>,
    ) -> (Router, queue::Queue) {
        test_site_with(site, publish, database_url, Limits::default()).await
    }

    /// [`test_site_on`] with the API's bounds set by the test.
    pub(crate) async fn test_site_with(
        site: &std::path::Path,
        publish: &'static str,
        database_url: Option<&str>,
        limits: Limits,
    ) -> (Router, queue::Queue) {
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        let args = ServeArgs {
            host: "127.0.0.1".into(),
            port: 0,
            db: DbArgs {
                data_dir: site.join("data"),
                database_url: database_url.map(str::to_string),
            },
            site_root: Some(site.to_path_buf()),
            no_worker: true,
            worker: crate::worker_cli::AgentArgs::defaults(),
        };
        let config = Config::load(args, |k| {
            (k == "STEPWISE_DEFAULT_PUBLISH_MODE").then(|| publish.to_string())
        })
        .unwrap();
        let queue = open_queue(&config.db, config.settings.defaults.clone())
            .await
            .unwrap();
        (
            router(&config, queue.clone(), limits, CancellationToken::new()),
            queue,
        )
    }

    /// A job created from `raw` and claimed by `worker` (the only queued job, so the one
    /// claimed), and the fence its worker writes with.
    pub(crate) async fn claimed_job(
        queue: &queue::Queue,
        raw: &serde_json::Value,
        worker: &str,
    ) -> (contract::Job, queue::Fence) {
        let job = queue.create_job(raw, Some("admin")).await.unwrap();
        let request = queue::ClaimRequest {
            worker_id: worker.into(),
            capabilities: vec!["codex".into(), "git".into()],
            allowed_types: None,
            allowed_repositories: None,
            lease: Duration::from_secs(600),
        };
        let claimed = queue.claim(&request).await.unwrap().expect("the job");
        assert_eq!(claimed.id, job.id, "one job queued at a time");
        let fence = queue::Fence::of(&claimed).unwrap();
        (job, fence)
    }

    /// A `Cookie` header of a live session of a fresh admin token.
    pub(crate) async fn session_cookie(queue: &queue::Queue) -> String {
        let admin = crate::auth::bootstrap_admin(queue).await.unwrap();
        let token = match admin {
            Some(secret) => queue
                .find_token_by_hash(&crate::auth::hash(&secret))
                .await
                .unwrap()
                .unwrap(),
            None => queue.list_tokens().await.unwrap().remove(0),
        };
        let secret = format!("sws_{}", "ab".repeat(32));
        queue
            .create_session(
                &token.id,
                queue::SessionPurpose::Session,
                &crate::auth::hash(&secret),
                std::time::Duration::from_secs(60),
            )
            .await
            .unwrap();
        format!("{}={secret}", crate::session::COOKIE_NAME)
    }

    pub(crate) async fn send(
        app: &Router,
        request: Request<Body>,
    ) -> (StatusCode, axum::http::HeaderMap, String) {
        let response = app.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        (
            parts.status,
            parts.headers,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    /// A logged-in GET.
    pub(crate) async fn get(
        app: &Router,
        cookie: &str,
        uri: &str,
    ) -> (StatusCode, axum::http::HeaderMap, String) {
        let request = Request::get(uri)
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap();
        send(app, request).await
    }

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
            let (stop, built, other) =
                (stop.0.clone(), built.clone(), tempfile::tempdir().unwrap());
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

    /// A `Cookie` header of a live session of a fresh user token with `role`.
    pub(crate) async fn session_as(queue: &queue::Queue, role: queue::Role) -> String {
        let minted = crate::auth::mint(
            &format!("{}-{}", role.as_str(), uuid_ish()),
            queue::TokenKind::User,
            crate::auth::Scope::user(role),
        )
        .unwrap();
        let token = queue.create_token(minted.record).await.unwrap();
        let secret = format!("sws_{}", uuid_ish());
        queue
            .create_session(
                &token.id,
                queue::SessionPurpose::Session,
                &crate::auth::hash(&secret),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        format!("{}={secret}", crate::session::COOKIE_NAME)
    }

    fn uuid_ish() -> String {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        format!("{:032x}", N.fetch_add(1, Ordering::SeqCst) + 0xabc0_0000)
    }

    /// The URL of the server function named `name` (`cancel_job`, …).
    pub(crate) fn server_fn_url(name: &str) -> String {
        leptos::server_fn::axum::server_fn_paths()
            .map(|(path, _)| path)
            .find(|path| {
                path.strip_prefix(app::SERVER_FN_PREFIX)
                    .is_some_and(|rest| rest.starts_with(name))
            })
            .unwrap_or_else(|| panic!("no server function {name}"))
            .to_string()
    }

    /// A server function called as the browser's scripts call it (a form-encoded POST).
    pub(crate) async fn call_server_fn(
        app: &Router,
        cookie: &str,
        name: &str,
        form: &str,
    ) -> (StatusCode, String) {
        let request = Request::post(server_fn_url(name))
            .header(header::COOKIE, cookie)
            .header(header::HOST, "localhost")
            .header(header::ORIGIN, "http://localhost")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Body::from(form.to_string()))
            .unwrap();
        let (status, _, body) = send(app, request).await;
        (status, body)
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
                "id=x&reason=%00",
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
            let error: contract::api::ErrorBody = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("{name} {form}: {e}: {body}"));
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
            crate::html_check::title(&html).as_deref(),
            Some(format!("{name} · stepwise").as_str()),
        );
        let smuggled = crate::html_check::smuggled(&html, "pwn");
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

    #[test]
    fn a_wildcard_bind_is_reached_on_loopback() {
        assert_eq!(
            base_url("0.0.0.0:3000".parse().unwrap()),
            "http://127.0.0.1:3000"
        );
        assert_eq!(base_url("[::]:80".parse().unwrap()), "http://[::1]:80");
        assert_eq!(base_url("10.1.2.3:8".parse().unwrap()), "http://10.1.2.3:8");
    }
}
