//! The server's Prometheus metrics: what this replica's queue did (told through the
//! queue's `Observer`), the jobs in each state (counted when scraped), its HTTP requests and
//! open event streams, and the embedded worker's running jobs. `http::metrics` serves them
//! at `GET /metrics`; the README names each one.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use contract::events::{CancelledBy, StepRef};
use contract::job::{events, task};
use contract::{Job, JobId, JobState, NormalizedTask};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::{Map, Value};

/// Step starts a replica keeps waiting for their ends.
const STEPS_KEPT: usize = 10_000;

/// Distinct model names a replica labels its token and cost figures with; the rest are
/// `other`. A model is whatever a task names, and each name would be a series for good.
const MAX_MODELS: usize = 64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct State {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Runtime {
    runtime: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Model {
    runtime: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Tokens {
    runtime: String,
    model: String,
    /// `input`, `cached_input`, `output` or `reasoning`.
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    method: String,
    /// The route's pattern (`/api/queue/jobs/{id}`), never the path: ids would make a
    /// series each.
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Route {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Delivery {
    /// `delivered`, `retrying` (failed, tried again later) or `failed` (refused, given
    /// up, or not posted).
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Stream {
    /// `jobs` (the list's) or `job` (one job's events).
    stream: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_from_a_second() -> Histogram {
    // 1 s to about 16 h.
    Histogram::new(exponential_buckets(1.0, 2.5, 12))
}

fn http_seconds() -> Histogram {
    // 1 ms to about 16 s.
    Histogram::new(exponential_buckets(0.001, 4.0, 8))
}

/// Every metric of one server process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    jobs: Family<State, Gauge>,
    submitted: Counter,
    claimed: Counter,
    ended: Family<State, Counter>,
    retried: Counter,
    claim_wait: Histogram,
    job_duration: Histograms<Runtime>,
    step_duration: Histograms<Runtime>,
    tokens: Family<Tokens, Counter>,
    cost: Family<Model, Counter<f64, AtomicU64>>,
    cancel_stop: Histogram,
    streams: Family<Stream, Gauge>,
    requests: Family<Request, Counter>,
    request_duration: Histograms<Route>,
    worker_running: Gauge,
    deliveries: Family<Delivery, Counter>,
    outbox: Gauge,
    /// The embedded worker's count of its running jobs, read at each scrape.
    worker_jobs: Option<Arc<AtomicUsize>>,
    /// When each step this replica saw start began, until this replica sees it end.
    steps: Mutex<HashMap<(JobId, usize), Instant>>,
    models: Mutex<HashSet<String>>,
}

impl Metrics {
    /// The metrics, registered; `worker_jobs` is the embedded worker's running count, if
    /// the server runs one.
    pub fn new(worker_jobs: Option<Arc<AtomicUsize>>) -> Metrics {
        let mut registry = Registry::with_prefix("stepwise");
        let jobs = Family::<State, Gauge>::default();
        registry.register(
            "jobs",
            "Jobs in each state, counted at scrape time",
            jobs.clone(),
        );
        let submitted = Counter::default();
        registry.register(
            "jobs_submitted",
            "Jobs submitted through this replica",
            submitted.clone(),
        );
        let claimed = Counter::default();
        registry.register(
            "jobs_claimed",
            "Claims of a job by a worker through this replica (each attempt counts)",
            claimed.clone(),
        );
        let ended = Family::<State, Counter>::default();
        registry.register(
            "jobs_ended",
            "Jobs that ended through this replica, by their end state: succeeded, failed, cancelled or dead_letter",
            ended.clone(),
        );
        let retried = Counter::default();
        registry.register(
            "jobs_retries_scheduled",
            "Failed attempts queued again for a later one",
            retried.clone(),
        );
        let claim_wait = Histogram::new(exponential_buckets(0.01, 4.0, 10));
        registry.register(
            "claim_wait_seconds",
            "From when a job could be claimed (submitted, or its retry due) to its claim",
            claim_wait.clone(),
        );
        let job_duration: Histograms<Runtime> = Family::new_with_constructor(seconds_from_a_second);
        registry.register(
            "job_duration_seconds",
            "From a job's first claim to its end, by runtime",
            job_duration.clone(),
        );
        let step_duration: Histograms<Runtime> =
            Family::new_with_constructor(seconds_from_a_second);
        registry.register(
            "step_duration_seconds",
            "From a step's start to its end (finished or failed), by runtime",
            step_duration.clone(),
        );
        let tokens = Family::<Tokens, Counter>::default();
        registry.register(
            "tokens",
            "Tokens the agent CLIs reported for their steps, by runtime, model and kind",
            tokens.clone(),
        );
        let cost = Family::<Model, Counter<f64, AtomicU64>>::default();
        registry.register(
            "cost_usd",
            "Cost in US dollars the agent CLIs reported for their steps, by runtime and model",
            cost.clone(),
        );
        let cancel_stop = Histogram::new(exponential_buckets(0.05, 2.0, 12));
        registry.register(
            "cancel_stop_seconds",
            "From a cancel request to the job ending cancelled",
            cancel_stop.clone(),
        );
        let streams = Family::<Stream, Gauge>::default();
        registry.register(
            "event_streams_open",
            "Event streams (SSE) open now",
            streams.clone(),
        );
        let requests = Family::<Request, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            requests.clone(),
        );
        let request_duration: Histograms<Route> = Family::new_with_constructor(http_seconds);
        registry.register(
            "http_request_duration_seconds",
            "Time to a response's head, by method and route (a stream's life is not counted)",
            request_duration.clone(),
        );
        let worker_running = Gauge::default();
        registry.register(
            "embedded_worker_running_jobs",
            "Jobs the worker inside this server runs now",
            worker_running.clone(),
        );
        let deliveries = Family::<Delivery, Counter>::default();
        registry.register(
            "webhook_deliveries",
            "Tries of a webhook notification by this replica, by outcome: delivered, retrying or failed",
            deliveries.clone(),
        );
        let outbox = Gauge::default();
        registry.register(
            "webhook_outbox_pending",
            "Notifications in the outbox still to be posted (all replicas'), counted at scrape time",
            outbox.clone(),
        );
        Metrics {
            registry,
            deliveries,
            outbox,
            jobs,
            submitted,
            claimed,
            ended,
            retried,
            claim_wait,
            job_duration,
            step_duration,
            tokens,
            cost,
            cancel_stop,
            streams,
            requests,
            request_duration,
            worker_running,
            worker_jobs,
            steps: Mutex::default(),
            models: Mutex::default(),
        }
    }

    /// The text exposition, with the jobs in each state as `counts` has them and
    /// `outbox` notifications to post.
    pub fn encode(&self, counts: &[(JobState, u64)], outbox: i64) -> String {
        self.outbox.set(outbox);
        for state in JobState::ALL {
            let n = counts
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            self.jobs
                .get_or_create(&State {
                    state: state.as_str().into(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        if let Some(running) = &self.worker_jobs {
            let n = running.load(Ordering::Relaxed);
            self.worker_running
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// One answered HTTP request.
    pub fn request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let method = match method {
            "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => method,
            _ => "other",
        };
        self.requests
            .get_or_create(&Request {
                method: method.into(),
                route: route.into(),
                status: status.to_string(),
            })
            .inc();
        self.request_duration
            .get_or_create(&Route {
                method: method.into(),
                route: route.into(),
            })
            .observe(seconds);
    }

    /// An event stream opened: counted open until the guard is dropped.
    pub fn stream_opened(self: &Arc<Self>, stream: &str) -> StreamGuard {
        let gauge = self
            .streams
            .get_or_create(&Stream {
                stream: stream.into(),
            })
            .clone();
        gauge.inc();
        StreamGuard(gauge)
    }

    /// The runtime and model labels of `job`: its model `default` when it names none,
    /// `other` past [`MAX_MODELS`] distinct ones.
    fn labels(&self, job: &Job) -> (String, String) {
        let task = NormalizedTask::from_job(job).ok();
        let runtime = task
            .as_ref()
            .map_or("none", |t| t.payload.task.runtime.mode.as_str())
            .to_string();
        let named = task
            .as_ref()
            .and_then(|t| t.payload.task.runtime.model.as_deref())
            .unwrap_or("default");
        let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        if models.contains(named) {
            return (runtime, named.into());
        }
        if models.len() < MAX_MODELS && named.len() <= 100 {
            models.insert(named.into());
            return (runtime, named.into());
        }
        (runtime, "other".into())
    }

    /// A step's start, kept until its end. Its end may go through another replica, so
    /// past [`STEPS_KEPT`] starts the oldest day's are let go.
    fn step_started(&self, job: &Job, index: usize) {
        let mut steps = self.lock_steps();
        if steps.len() >= STEPS_KEPT {
            let day = std::time::Duration::from_secs(24 * 3600);
            steps.retain(|_, started| started.elapsed() < day);
        }
        if steps.len() < STEPS_KEPT {
            steps.insert((job.id, index), Instant::now());
        }
    }

    fn step_ended(&self, job: &Job, kind: &str, payload: &Map<String, Value>) {
        let (runtime, model) = self.labels(job);
        let runtime = runtime.as_str();
        let started = step_index(payload).and_then(|i| self.lock_steps().remove(&(job.id, i)));
        if let Some(started) = started {
            self.step_duration
                .get_or_create(&Runtime {
                    runtime: runtime.into(),
                })
                .observe(started.elapsed().as_secs_f64());
        }
        let Ok(Some(usage)) = contract::events::reported_usage(kind, payload) else {
            return;
        };
        for (what, n) in [
            ("input", usage.input_tokens),
            ("cached_input", usage.cached_input_tokens),
            ("output", usage.output_tokens),
            ("reasoning", usage.reasoning_tokens),
        ] {
            if let Some(n) = n {
                self.tokens
                    .get_or_create(&Tokens {
                        runtime: runtime.into(),
                        model: model.clone(),
                        kind: what.into(),
                    })
                    .inc_by(n);
            }
        }
        if let Some(cost) = usage.cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
            self.cost
                .get_or_create(&Model {
                    runtime: runtime.into(),
                    model,
                })
                .inc_by(cost);
        }
    }

    fn lock_steps(&self) -> std::sync::MutexGuard<'_, HashMap<(JobId, usize), Instant>> {
        self.steps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A job this replica saw leave its run (ended, handed back, lost): the starts of its
    /// steps that no end will follow here are forgotten.
    fn forget_steps(&self, job: &JobId) {
        self.lock_steps().retain(|(id, _), _| id != job);
    }
}

impl queue::Observer for Metrics {
    fn recorded(&self, job: &Job, kind: &str, payload: &Map<String, Value>) {
        let seconds = |from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>| {
            ((to - from).num_milliseconds().max(0)) as f64 / 1000.0
        };
        match kind {
            events::JOB_CREATED => {
                self.submitted.inc();
            }
            events::JOB_CLAIMED => {
                self.claimed.inc();
                self.claim_wait
                    .observe(seconds(job.next_attempt_at, job.updated_at));
            }
            events::JOB_RETRY_SCHEDULED => {
                self.retried.inc();
            }
            events::JOB_NOTIFICATION_DELIVERED | events::JOB_NOTIFICATION_FAILED => {
                let outcome = if kind == events::JOB_NOTIFICATION_DELIVERED {
                    "delivered"
                } else if payload.get("retrying") == Some(&Value::Bool(true)) {
                    "retrying"
                } else {
                    "failed"
                };
                self.deliveries
                    .get_or_create(&Delivery {
                        outcome: outcome.into(),
                    })
                    .inc();
            }
            task::STEP_STARTED => {
                if let Some(index) = step_index(payload) {
                    self.step_started(job, index);
                }
            }
            task::STEP_FINISHED | task::STEP_FAILED | task::ITERATION_FINISHED => {
                self.step_ended(job, kind, payload);
            }
            _ => {}
        }
        let ended = job.status.is_terminal() && job.status != JobState::AwaitingApproval;
        if events::ENDINGS.contains(&kind) && ended {
            self.forget_steps(&job.id);
            self.ended
                .get_or_create(&State {
                    state: job.status.as_str().into(),
                })
                .inc();
            if let (Some(started), Some(finished)) = (job.started_at, job.finished_at) {
                let (runtime, _) = self.labels(job);
                self.job_duration
                    .get_or_create(&Runtime { runtime })
                    .observe(seconds(started, finished));
            }
            // Only a job a worker held had anything to stop: one a user cancelled before any
            // worker did ends at once, and would only pull the figures toward zero.
            let stopped = payload
                .get("by")
                .and_then(|by| serde_json::from_value::<CancelledBy>(by.clone()).ok())
                .is_some_and(|by| by != CancelledBy::User);
            if let (events::JOB_CANCELLED, true, Some(asked), Some(finished)) =
                (kind, stopped, job.cancel_requested_at, job.finished_at)
            {
                self.cancel_stop.observe(seconds(asked, finished));
            }
        } else if [
            events::JOB_LEASE_EXPIRED,
            events::JOB_PAUSED,
            events::JOB_RETRY_SCHEDULED,
        ]
        .contains(&kind)
        {
            self.forget_steps(&job.id);
        }
    }
}

/// The step a step event is about, as the contract reads it.
fn step_index(payload: &Map<String, Value>) -> Option<usize> {
    serde_json::from_value::<StepRef>(Value::Object(payload.clone()))
        .ok()
        .map(|step| step.step_index)
}

/// Holds an event stream counted open; dropping it counts it closed.
#[derive(Debug)]
pub struct StreamGuard(Gauge);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}
