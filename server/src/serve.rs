use axum::Router;
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
