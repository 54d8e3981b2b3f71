//! The loop of every background service (the rescuer, retention, the live table's vacuum):
//! a pass each interval until stopped. A pass that fails is logged and the next tick tries
//! again: the database may be back by then.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::QueueError;

/// Runs `pass` every `interval` (the first at once) until `stop`, handing each report to
/// `done`; `what` names the service in the log line of a failed pass.
pub(crate) async fn every<R, Fut>(
    interval: Duration,
    stop: CancellationToken,
    what: &'static str,
    mut pass: impl FnMut() -> Fut,
    mut done: impl FnMut(R),
) where
    Fut: Future<Output = Result<R, QueueError>>,
{
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = ticks.tick() => {}
        }
        match pass().await {
            Ok(report) => done(report),
            Err(error) => tracing::warn!(%error, "{what} pass failed"),
        }
    }
}
