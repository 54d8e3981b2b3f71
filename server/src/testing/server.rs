//! The real API router over a temporary SQLite queue, listening on a real socket, for
//! tests that drive it the way a user's machine does: through `QueueClient`.

use std::future::IntoFuture;
use std::net::SocketAddr;

use queue::{Role, TokenKind};
use tokio::task::JoinHandle;
use worker::client::QueueClient;

use super::{Fixture, fixture};

pub const ARTIFACT_LIMIT: u64 = 64 * 1024;

pub struct TestServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
    fixture: Fixture,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start() -> TestServer {
    serve(fixture(ARTIFACT_LIMIT).await).await
}

/// [`start`] on the PostgreSQL database at `database_url` (SQLite when `None`), its GitHub
/// deliveries waking `wake`.
pub async fn start_on(
    database_url: Option<&str>,
    wake: std::sync::Arc<tokio::sync::Notify>,
) -> TestServer {
    serve(super::fixture_on(ARTIFACT_LIMIT, database_url, wake).await).await
}

/// [`start_on`] whose GitHub deliveries also make jobs by the intake `intake` makes of
/// the server's queue.
pub async fn start_with(
    database_url: Option<&str>,
    wake: std::sync::Arc<tokio::sync::Notify>,
    intake: impl FnOnce(&queue::Queue) -> Option<std::sync::Arc<crate::github::intake::Intake>>,
) -> TestServer {
    serve(super::fixture_with(ARTIFACT_LIMIT, database_url, wake, intake).await).await
}

async fn serve(fixture: Fixture) -> TestServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("a bound address");
    let app = fixture.router.clone();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).into_future().await;
    });
    TestServer {
        addr,
        task,
        fixture,
    }
}

impl TestServer {
    pub fn queue(&self) -> &queue::Queue {
        &self.fixture.queue
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn token(&self, name: &str, kind: TokenKind, role: Option<Role>) -> String {
        self.fixture.token(name, kind, role, None).await
    }

    pub async fn user(&self, role: Role) -> QueueClient {
        let token = self.token(role.as_str(), TokenKind::User, Some(role)).await;
        QueueClient::new(&self.url(), &token).expect("a client")
    }

    pub async fn worker(&self, name: &str) -> QueueClient {
        let token = self.token(name, TokenKind::Worker, None).await;
        QueueClient::new(&self.url(), &token).expect("a client")
    }
}
