//! Test fixtures shared by the API, CLI, site and hostile tests: a real queue on a
//! temporary SQLite file, the API router (and `/mcp`) over it, and tokens minted straight into it
//! (here); the same on a real socket (`server`); the whole site (`site`); and pages read
//! as a browser reads them (`html`).

pub mod html;
pub mod server;
pub mod site;

/// The GitHub webhook secret of the test servers' `POST /api/integrations/github`.
pub const GITHUB_WEBHOOK_SECRET: &str = "github-webhook-secret-for-tests";

use std::time::Duration;

use axum::Router;
use queue::{Queue, Role, TokenKind};

use crate::http::api::router;
use crate::http::auth::{Scope, mint};
use crate::http::{AppState, Limits};

pub struct Fixture {
    pub queue: Queue,
    pub router: Router,
    /// The router's `closing`: cancel it to end its streams, as a shutdown does.
    pub closing: tokio_util::sync::CancellationToken,
    _dir: tempfile::TempDir,
}

pub async fn fixture(artifact_limit: u64) -> Fixture {
    fixture_on(
        artifact_limit,
        None,
        std::sync::Arc::new(tokio::sync::Notify::new()),
    )
    .await
}

/// [`fixture`] on the PostgreSQL database at `database_url` (SQLite when `None`), its
/// GitHub deliveries waking `wake`.
pub async fn fixture_on(
    artifact_limit: u64,
    database_url: Option<&str>,
    wake: std::sync::Arc<tokio::sync::Notify>,
) -> Fixture {
    fixture_with(artifact_limit, database_url, wake, |_| None).await
}

/// [`fixture_on`] whose GitHub deliveries also make jobs by the intake `intake` makes of
/// the fixture's queue.
pub async fn fixture_with(
    artifact_limit: u64,
    database_url: Option<&str>,
    wake: std::sync::Arc<tokio::sync::Notify>,
    intake: impl FnOnce(&Queue) -> Option<std::sync::Arc<crate::github::intake::Intake>>,
) -> Fixture {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = match database_url {
        Some(url) => queue::Database::open_url(url).await,
        None => queue::Database::open_data_dir(&dir.path().join("data")).await,
    }
    .expect("the database opens");
    let mut config = queue::QueueConfig::new(dir.path().join("artifacts"));
    config.max_artifact_bytes = artifact_limit;
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new(None));
    config.observers = vec![metrics.clone()];
    let queue = Queue::open(db, config).await.expect("the queue opens");
    queue.migrate().await.expect("migrations run");
    // Short keep-alives, so stream tests see traffic without waiting.
    let limits = Limits {
        keep_alive: Duration::from_secs(1),
        ..Limits::default()
    };
    let closing = tokio_util::sync::CancellationToken::new();
    let state = AppState {
        queue: queue.clone(),
        limits,
        closing: closing.clone(),
        metrics,
        github: Some(std::sync::Arc::new(
            crate::http::GitHubHook::new(GITHUB_WEBHOOK_SECRET.into(), wake)
                .with_intake(intake(&queue)),
        )),
    };
    let router = router(artifact_limit)
        .merge(crate::http::health::router())
        .merge(crate::http::metrics::router())
        // Counted by route, as the site counts them.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::http::metrics::track,
        ))
        .with_state(state.clone())
        .merge(crate::mcp::router(state));
    Fixture {
        queue,
        router,
        closing,
        _dir: dir,
    }
}

impl Fixture {
    /// A stored token's secret; `capabilities` scopes a worker token.
    pub async fn token(
        &self,
        name: &str,
        kind: TokenKind,
        role: Option<Role>,
        capabilities: Option<Vec<&str>>,
    ) -> String {
        let scope = Scope {
            role,
            capabilities: capabilities.map(|c| c.into_iter().map(String::from).collect()),
            allowed_repositories: None,
            allowed_job_types: None,
        };
        let minted = mint(name, kind, scope).expect("a token");
        self.queue
            .create_token(minted.record)
            .await
            .expect("the token is stored");
        minted.secret
    }
}
