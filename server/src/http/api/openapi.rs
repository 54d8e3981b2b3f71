//! `GET /api/openapi.json`: the API described from the handlers and types themselves, so
//! the document cannot drift from the code.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{artifacts, course, integrations, jobs, schedules, stream, worker};
use crate::http::auth::User;
use crate::http::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(title = "stepwise queue API", description = "A queue for coding-agent tasks. Every route but the two probes and the integrations (signed by their senders) needs `Authorization: Bearer <token>`."),
    paths(
        jobs::create, jobs::list, jobs::show, jobs::cancel, jobs::events, jobs::checkpoints, course::pause, course::resume, course::retry, course::approve, course::reject, course::append_steps, course::set_budget, course::follow_up, stream::stream_events, stream::stream_jobs,
        artifacts::list, artifacts::download, artifacts::upload,
        crate::http::health::healthz, crate::http::health::readyz, crate::http::metrics::metrics,
        worker::claim, worker::heartbeat, worker::complete, worker::complete_and_claim, worker::fail, worker::append_event, worker::ack_cancel, worker::ack_pause, worker::resume_patch, worker::resume_session, worker::request_approval,
        integrations::github,
        schedules::create, schedules::list, schedules::show, schedules::remove, schedules::pause, schedules::resume,
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "jobs", description = "Submit, read, cancel, pause, resume, retry, approve and reject jobs (user tokens)"),
        (name = "workers", description = "Claim and run jobs (worker tokens)"),
        (name = "artifacts", description = "Logs, patches and results of a job"),
        (name = "health", description = "Probes for load balancers and orchestrators (no token)"),
        (name = "metrics", description = "Prometheus metrics (any user token)"),
        (name = "schedules", description = "Recurring tasks: a cron line in a time zone, and the job request each slot queues (user tokens)"),
        (name = "integrations", description = "Deliveries from other services, authenticated by their own signatures (no token)"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/api/openapi.json", get(document))
}

async fn document(State(_): State<AppState>, _user: User) -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
