//! `stepwise serve`: opens the database, serves the whole site (`http::site`) with the
//! embedded worker beside it, and stops gracefully on a signal.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio_util::sync::CancellationToken;
use worker::runner::Shutdown;

use super::config::Config;
use super::db::open_queue;
use super::error::CliError;
use super::signal::shutdown_signal;
use crate::http::auth::bootstrap_admin;
use crate::http::site::router;
use crate::http::{AppState, Limits, session};
use crate::metrics::Metrics;

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
    // The embedded worker's running jobs, which /metrics reports.
    let worker_jobs = Arc::new(AtomicUsize::new(0));
    let metrics = Arc::new(Metrics::new(
        config.worker.is_some().then(|| worker_jobs.clone()),
    ));
    let (inbox, ended) = crate::webhooks::inbox();
    let queue = open_queue(
        &config.db,
        config.queue_settings(vec![metrics.clone(), inbox]),
    )
    .await?;
    let admin = bootstrap_admin(&queue).await.map_err(CliError::Bootstrap)?;
    let stop = tokio_util::sync::CancellationToken::new();

    // Stops the HTTP server; its streams end at once (the rest drains gracefully).
    let http_stop = CancellationToken::new();
    let wake = Arc::new(tokio::sync::Notify::new());
    let feedback =
        crate::feedback::FeedbackService::new(config.feedback.clone(), queue.clone(), wake.clone());
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| CliError::Bind {
            addr: config.addr.to_string(),
            source,
        })?;
    let local = listener.local_addr().map_err(CliError::Serve)?;
    let base = base_url(local);
    let mut webhooks = config.webhooks.clone();
    webhooks.public_url.get_or_insert_with(|| base.clone());
    let (intake, replies) = github_source(&config, &queue, webhooks.public_url.as_deref())?;
    let state = AppState {
        queue: queue.clone(),
        limits: Limits::default(),
        closing: http_stop.clone(),
        metrics,
        github: config.github_webhook_secret.as_ref().map(|secret| {
            Arc::new(crate::http::GitHubHook::new(secret.0.clone(), wake).with_intake(intake))
        }),
    };
    let app = router(&config.site(), state.clone(), crate::mcp::router(state));
    // Printed, not logged: these are the lines a person looks for, and a log must never
    // hold a secret. The admin token is shown this once.
    if let Some(secret) = admin {
        say!("created the first admin token (shown only now; keep it): {secret}");
        say!("use it as `Authorization: Bearer <token>`; make more with `stepwise token create`");
    }
    let notifier = crate::webhooks::WebhookService::new(webhooks, queue.clone(), ended)
        .start(stop.clone())
        .await;
    // After the webhooks listen: the rescuer's first pass may end jobs (expired leases),
    // and their notifications are written only while a replica that posts listens.
    let rescuer =
        queue::Rescuer::new(queue.clone(), queue::RescuerConfig::default()).start(stop.clone());
    let retention = queue::Retention::new(queue.clone(), config.retention).start(stop.clone());
    let vacuum =
        queue::Vacuum::new(queue.clone(), queue::VacuumConfig::default()).start(stop.clone());
    let scheduler =
        queue::Scheduler::new(queue.clone(), queue::SchedulerConfig::default()).start(stop.clone());
    let resolver =
        queue::Resolver::new(queue.clone(), queue::ResolverConfig::default()).start(stop.clone());
    let watcher = feedback.start(stop.clone());
    let replier = replies.map(|r| r.start(stop.clone()));
    let login = session::login_url(&queue, &base)
        .await
        .map_err(CliError::Bootstrap)?;
    let minutes = session::LOGIN_CODE_TTL.as_secs() / 60;
    say!("stepwise is running on {base}");
    if login.contains("?code=") {
        say!("log in to the dashboard (this link works once, for {minutes} minutes): {login}");
    } else {
        say!("log in to the dashboard with a user token: {login}");
    }
    let worker = Shutdown::default();
    let embedded = match config.worker.clone() {
        Some(agent) => Some(
            super::worker::start_embedded(
                &queue,
                &base,
                local.port(),
                &config.db.data_dir,
                agent,
                worker.clone(),
                worker_jobs,
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
    let _ = retention.await;
    let _ = vacuum.await;
    let _ = scheduler.await;
    let _ = resolver.await;
    let _ = notifier.await;
    let _ = watcher.await;
    if let Some(replier) = replier {
        let _ = replier.await;
    }
    served.map_err(CliError::Serve)
}

/// Where a person on this machine reaches a listener: a wildcard bind is reached on loopback.
/// With `--github-rules`: what makes jobs of GitHub's deliveries, and the service that
/// answers on their issues.
fn github_source(
    config: &Config,
    queue: &queue::Queue,
    public_url: Option<&str>,
) -> Result<
    (
        Option<Arc<crate::github::intake::Intake>>,
        Option<crate::github::replies::ReplyService>,
    ),
    CliError,
> {
    use crate::github::{api::GitHubApi, intake::Intake, replies, rules::RulesFile};
    let (Some(path), Some(token)) = (&config.github_rules, &config.feedback.token) else {
        return Ok((None, None));
    };
    let rules = RulesFile::open(path).map_err(|reason| {
        CliError::Config(super::error::ConfigError::Flag {
            flag: "--github-rules",
            value: path.display().to_string(),
            reason,
        })
    })?;
    let wake = Arc::new(tokio::sync::Notify::new());
    let api = GitHubApi::new(&config.feedback.api_url, config.feedback.timeout);
    let clone_base = crate::github::api::clone_base(&config.feedback.api_url);
    let intake = Intake::new(rules, api, token.clone(), clone_base, wake.clone());
    let reply = replies::ReplyConfig {
        api_url: config.feedback.api_url.clone(),
        token: token.clone(),
        public_url: public_url.unwrap_or_default().to_string(),
        retry: std::time::Duration::from_secs(5),
        timeout: config.feedback.timeout,
    };
    Ok((
        Some(Arc::new(intake)),
        Some(replies::ReplyService::new(reply, queue.clone(), wake)),
    ))
}

fn base_url(local: std::net::SocketAddr) -> String {
    let ip = match local.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => std::net::Ipv4Addr::LOCALHOST.into(),
        ip if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, local.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
