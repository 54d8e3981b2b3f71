//! The whole site on one router: the REST API, the login gate, the dashboard's pages and
//! their server functions, each reaching the one queue service.

use std::net::SocketAddr;
use std::path::PathBuf;

use app::ServerSettings;
use axum::Router;
use axum::response::Redirect;
use axum::routing::get;
use leptos::prelude::*;
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use tower_http::trace::TraceLayer;

use super::state::AppState;

/// What the pages need from the server's configuration.
#[derive(Debug, Clone)]
pub struct SiteConfig {
    pub addr: SocketAddr,
    /// The built site (wasm, JS, CSS).
    pub site_root: PathBuf,
    pub settings: ServerSettings,
    /// Where the skills the task form offers are installed.
    pub skills_dir: PathBuf,
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

/// The site over `state`: the API, the login, the pages and their server functions, and
/// `mcp` (`crate::mcp::router`, passed in because MCP builds on this module and not the
/// other way), each request traced by its path.
pub fn router(site: &SiteConfig, state: AppState, mcp: Router) -> Router {
    let max_artifact_bytes = state.queue.config().max_artifact_bytes;
    let api = super::api::router(max_artifact_bytes).with_state(state.clone());
    let state_for_health = state.clone();
    let state_for_metrics = state.clone();
    let login = super::session::router().with_state(state.clone());
    let options = LeptosOptions::builder()
        .output_name("stepwise")
        .site_root(site.site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(site.addr)
        .env(leptos::config::Env::PROD)
        .build();
    let routes = page_routes();
    let settings = site.settings.clone();
    let skills_dir = site.skills_dir.clone();
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
            super::session::gate,
        ))
        .merge(api)
        // Probes send no token and no cookie.
        .merge(super::health::router().with_state(state_for_health))
        // Beside the API, outside the login gate: MCP clients send a bearer token, never a
        // cookie.
        .merge(mcp)
        // A scraper sends a bearer token, never a cookie.
        .merge(super::metrics::router().with_state(state_for_metrics.clone()))
        // Every route above, counted by its pattern.
        .route_layer(axum::middleware::from_fn_with_state(
            state_for_metrics,
            super::metrics::track,
        ))
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
