//! The pause as the run sees it (an operator's, or the budget's), and what the job has
//! spent: the job's usage when it was claimed plus every usage this run reports, asked of
//! the task's budget with the queue's own test ([`contract::JobBudget::overrun`]). The queue decides the pause; this only keeps the run
//! from starting more work before the queue's request reaches it, and stops a step whose
//! agent time runs out (`maxMinutes`) at once, as an immediate pause.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use contract::StepUsage;
use serde_json::Value;

use super::{Log, Run};

/// An operator's pause as the run sees it: requested (stop at the next step or iteration
/// boundary), and perhaps `now` too (the running step is stopped, through the run's
/// cancel token, by whoever holds that).
#[derive(Debug, Clone, Default)]
pub struct Pause {
    requested: CancellationToken,
    now: CancellationToken,
}

impl Pause {
    pub fn request(&self, immediate: bool) {
        self.requested.cancel();
        if immediate {
            self.now.cancel();
        }
    }

    pub fn is_requested(&self) -> bool {
        self.requested.is_cancelled()
    }

    /// Fires when an immediate pause is requested.
    pub async fn immediate(&self) {
        self.now.cancelled().await
    }

    pub fn is_immediate(&self) -> bool {
        self.now.is_cancelled()
    }
}

/// A timer that asks for an immediate pause when the budget's minutes run out; dropping
/// it (the agent ended first) disarms it.
pub(super) struct MinutesLeft {
    timer: Option<tokio::task::JoinHandle<()>>,
    began: Instant,
}

impl MinutesLeft {
    /// The agent ended: its `usage` with how long it ran; the timer is disarmed.
    pub(super) fn stop(self, usage: StepUsage) -> StepUsage {
        let ran = u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX);
        StepUsage {
            duration_ms: Some(ran),
            ..usage
        }
    }
}

impl Drop for MinutesLeft {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            timer.abort();
        }
    }
}

impl Run<'_> {
    /// Adds a reported event's usage to what the run has spent, as the queue adds it.
    pub(super) fn count_spent(&self, kind: &str, payload: &Value) {
        let Value::Object(map) = payload else { return };
        if let Ok(Some(usage)) = contract::events::reported_usage(kind, map) {
            let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
            *spent = *spent + usage;
        }
    }

    /// Starts the clock of an agent run: its time goes into its usage, and when the
    /// budget's minutes run out meanwhile the run is paused at once (the agent stopped).
    pub(super) fn agent_clock(&self) -> MinutesLeft {
        let began = Instant::now();
        let left = self
            .budget
            .and_then(|budget| budget.time_left(&self.spent()));
        let timer = left.map(|left| {
            let pause = self.pause.clone();
            tokio::spawn(async move {
                tokio::time::sleep(left).await;
                pause.request(true);
            })
        });
        MinutesLeft { timer, began }
    }

    /// At a step or iteration boundary: a budget spent pauses the run here (the queue has
    /// asked, or is about to, on the usage already reported).
    pub(super) fn pause_if_spent(&self, log: &mut Log) {
        let Some(overrun) = self.budget.and_then(|b| b.overrun(&self.spent())) else {
            return;
        };
        let message = format!(
            "budget reached: {} ({}); the job pauses for an operator to raise it",
            overrun.describe(),
            overrun.limit
        );
        log.line(self.redactor, &message);
        self.pause.request(false);
    }

    fn spent(&self) -> StepUsage {
        *self.spent.lock().unwrap_or_else(|e| e.into_inner())
    }
}
