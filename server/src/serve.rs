use axum::Router;
use axum::response::Redirect;
use axum::routing::get;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use tower_http::trace::TraceLayer;

use crate::cli::CliError;
use crate::config::Config;

/// Opens the database, builds the router and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), CliError> {
    let db = match &config.database_url {
        Some(url) => queue::Database::open_url(url).await?,
        None => queue::Database::open_data_dir(&config.data_dir).await?,
    };
    tracing::info!(backend = db.backend(), data_dir = %config.data_dir.display(), "database ready");

    let app = router(&config);
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| CliError::Bind {
            addr: config.addr.to_string(),
            source,
        })?;
    let local = listener.local_addr().map_err(CliError::Serve)?;
    // Printed, not logged: this is the line a person looks for.
    println!("stepwise is running: open http://{local}/tasks/queue");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(CliError::Serve)
}

fn router(config: &Config) -> Router {
    let options = LeptosOptions::builder()
        .output_name("stepwise")
        .site_root(config.site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(config.addr)
        .env(leptos::config::Env::PROD)
        .build();
    let routes = generate_route_list(app::App);
    let settings = config.settings.clone();
    Router::new()
        // A real redirect, so it works without JavaScript and for curl.
        .route("/", get(|| async { Redirect::temporary("/tasks/queue") }))
        .leptos_routes_with_context(
            &options,
            routes,
            move || provide_context(settings.clone()),
            {
                let options = options.clone();
                move || app::shell(options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler(app::shell))
        .layer(TraceLayer::new_for_http())
        .with_state(options)
}

async fn shutdown_signal() {
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
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode, header};
    use tower::ServiceExt;

    use super::*;
    use crate::cli::ServeArgs;

    fn config(site: &std::path::Path, publish: &'static str) -> Config {
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        let args = ServeArgs {
            host: "127.0.0.1".into(),
            port: 0,
            data_dir: site.join("data"),
            database_url: None,
            site_root: Some(site.to_path_buf()),
        };
        Config::load(args, |k| (k == "STEPWISE_DEFAULT_PUBLISH_MODE").then(|| publish.to_string()))
            .unwrap()
    }

    async fn get(app: Router, uri: &str) -> (StatusCode, axum::http::HeaderMap, String) {
        let response = app.oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        (parts.status, parts.headers, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn root_redirects_to_the_queue_without_javascript() {
        let site = tempfile::tempdir().unwrap();
        let (status, headers, _) = get(router(&config(site.path(), "pr")), "/").await;
        assert_eq!(status, StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(headers[header::LOCATION], "/tasks/queue");
    }

    #[tokio::test]
    async fn queue_page_is_server_rendered_with_the_configured_publish_default() {
        let site = tempfile::tempdir().unwrap();
        let (status, _, html) = get(router(&config(site.path(), "none")), "/tasks/queue").await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains("Task queue"), "{html}");
        assert!(html.contains(r#"data-testid="default-publish-mode">none<"#), "{html}");
        assert!(html.contains("/pkg/stepwise.js"), "the page must load the hydrate bundle");
    }

    #[tokio::test]
    async fn unknown_pages_are_404() {
        let site = tempfile::tempdir().unwrap();
        let (status, _, html) = get(router(&config(site.path(), "pr")), "/no/such/page").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(html.contains("Go to the queue"), "{html}");
    }
}
