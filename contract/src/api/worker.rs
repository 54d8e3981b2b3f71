//! The bodies of the worker routes (`/api/queue/jobs/claim`, `…/{id}/heartbeat`,
//! `complete`, `complete-and-claim`, `fail`, `events`, `cancel/ack`), read by the server and sent by the
//! worker's client. Field order is the order on the wire; a field left out by a worker
//! (`workerId`) is not sent at all, while an empty optional one is sent as `null`.
//!
//! Doc comments on these types become the OpenAPI document's descriptions, so they say
//! what the server tells clients; notes for this crate's readers are plain comments.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::JobId;
use crate::job::{EventLevel, Job, JobState, NewEvent};

// The worker's client sends `capabilities` always (its tools, after the token narrows
// them); `None` asks for whatever the token allows.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    #[serde(alias = "workerCapabilities", skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_types: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u64>,
    /// Long-poll: wait up to this long for a job before answering `{"job": null}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<f64>,
    /// What the worker runs, e.g. `stepwise-worker 0.1.0`; shown on the workers page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_version: Option<String>,
    /// How the worker boxes its agents' steps: `bwrap`, `bwrap, no network` or `off`;
    /// shown on the workers page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Take no job of a repository with this many jobs running already, on any worker (1
    /// or more): the worker's own limit, which can only tighten the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_running_per_repository: Option<u32>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claimed {
    pub job: Option<Job>,
}

/// The part of every worker write that proves the lease.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FenceBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub attempt: Option<u32>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub attempt: Option<u32>,
    pub lease_seconds: Option<u64>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub attempt: Option<u32>,
    pub result_summary: Option<String>,
}

/// A completion and the worker's next claim in one call
/// (`POST /api/queue/jobs/{id}/complete-and-claim`): the job is completed as
/// `…/complete` completes it, then, once that is written, the next job is claimed as
/// `/api/queue/jobs/claim` claims it, with `claim` as its body. A completion refused
/// claims nothing.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteAndClaimBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub attempt: Option<u32>,
    pub result_summary: Option<String>,
    /// The next claim, as `/api/queue/jobs/claim` takes it (its `workerId`, if any, must
    /// be this one's too); `waitSeconds` waits for a job after the completion is written.
    #[serde(default)]
    pub claim: ClaimBody,
}

/// What a completion with the next claim came to.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletedAndClaimed {
    /// The job completed: its id and state, not its task (`GET /api/queue/jobs/{id}`
    /// reads the rest).
    pub completed: Completed,
    /// The next job, leased to this worker, or `null` when none came within `waitSeconds`.
    pub job: Option<Job>,
}

/// A job a completion wrote, as `complete-and-claim` answers it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completed {
    pub id: JobId,
    /// `succeeded`.
    pub status: JobState,
}

impl From<&Job> for Completed {
    fn from(job: &Job) -> Self {
        Completed {
            id: job.id,
            status: job.status,
        }
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub attempt: Option<u32>,
    pub error_message: String,
    /// Retry later (a passing problem) or fail for good; default: for good.
    #[serde(default)]
    pub retryable: bool,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub attempt: Option<u32>,
    /// The event's kind (`task.step.started`, …). Left out, as the seed system's worker
    /// does, the message is the kind when it is a task event kind, else the event is a
    /// `task.message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub level: EventLevel,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub payload: Map<String, Value>,
}

impl EventBody {
    /// `event`, appended by the worker holding the job at `attempt`.
    pub fn new(attempt: u32, event: NewEvent) -> EventBody {
        EventBody {
            worker_id: None,
            attempt: Some(attempt),
            kind: Some(event.kind),
            level: event.level,
            message: event.message,
            payload: event.payload,
        }
    }

    /// The event itself, without the fence.
    pub fn into_event(self) -> NewEvent {
        let kind = self
            .kind
            .unwrap_or_else(|| crate::job::task::kind_of_message(&self.message).to_string());
        NewEvent {
            kind,
            level: self.level,
            message: self.message,
            payload: self.payload,
        }
    }
}

/// The parts of the artifact upload's multipart form (`POST /jobs/{id}/artifacts/upload`):
/// the worker's client sends them and the server reads them by these names.
pub mod upload {
    /// The artifact's bytes.
    pub const FILE: &str = "file";
    /// Its path in the job's artifact list, such as `logs/steps/step-0000.log`.
    pub const NAME: &str = "name";
    /// The attempt of the lease the upload is made under; left out, the lease the token's
    /// worker holds now.
    pub const ATTEMPT: &str = "attempt";
    /// Optional: must be the token's worker when given.
    pub const WORKER_ID: &str = "workerId";
    /// Optional: the content type when the file part carries none.
    pub const CONTENT_TYPE: &str = "contentType";
    /// Optional: `sha256:<hex>` of the file, checked against the bytes received (the seed
    /// system's worker sends it).
    pub const DIGEST: &str = "digest";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // The worker's client built these bodies with `json!` before they lived here; the
    // bytes on the wire are the same (serde_json sorts `json!` keys, which is also the
    // field order above).
    #[test]
    fn worker_bodies_serialize_as_the_client_sent_them_by_hand() {
        fn text(body: &impl Serialize) -> String {
            serde_json::to_string(body).unwrap()
        }
        let heartbeat = HeartbeatBody {
            worker_id: None,
            attempt: Some(3),
            lease_seconds: None,
        };
        assert_eq!(
            text(&heartbeat),
            json!({ "attempt": 3, "leaseSeconds": null }).to_string()
        );
        let complete = CompleteBody {
            worker_id: None,
            attempt: Some(1),
            result_summary: Some("done".into()),
        };
        assert_eq!(
            text(&complete),
            json!({ "attempt": 1, "resultSummary": "done" }).to_string()
        );
        let fail = FailBody {
            worker_id: None,
            attempt: Some(2),
            error_message: "boom".into(),
            retryable: true,
        };
        assert_eq!(
            text(&fail),
            json!({ "attempt": 2, "errorMessage": "boom", "retryable": true }).to_string()
        );
        let ack = FenceBody {
            worker_id: None,
            attempt: Some(4),
        };
        assert_eq!(text(&ack), json!({ "attempt": 4 }).to_string());
        let event = EventBody::new(
            5,
            NewEvent {
                kind: "task.step.started".into(),
                level: EventLevel::Warn,
                message: "m".into(),
                payload: json!({ "stepIndex": 0 }).as_object().cloned().unwrap(),
            },
        );
        assert_eq!(
            text(&event),
            r#"{"attempt":5,"kind":"task.step.started","level":"warn","message":"m","payload":{"stepIndex":0}}"#
        );
        let claim = ClaimBody {
            capabilities: Some(vec!["codex".into()]),
            wait_seconds: Some(2.5),
            ..ClaimBody::default()
        };
        assert_eq!(
            text(&claim),
            r#"{"capabilities":["codex"],"waitSeconds":2.5}"#
        );
    }

    #[test]
    fn an_event_without_a_kind_takes_it_from_its_message_as_the_seed_worker_sends_it() {
        let seed = |message: &str| -> NewEvent {
            serde_json::from_value::<EventBody>(json!({
                "workerId": "w1", "level": "info", "message": message,
                "payload": { "stepIndex": 0 },
            }))
            .unwrap()
            .into_event()
        };
        let plan = seed("task.steps.plan");
        assert_eq!(
            (plan.kind.as_str(), plan.message.as_str()),
            ("task.steps.plan", "task.steps.plan")
        );
        assert_eq!(plan.payload["stepIndex"], 0);
        assert_eq!(seed(" task.step.started ").kind, "task.step.started");
        let free = seed("Cloning the repository");
        assert_eq!(
            (free.kind.as_str(), free.message.as_str()),
            ("task.message", "Cloning the repository")
        );
        // A queue kind is never taken from a message: workers may not append those.
        assert_eq!(seed("job.completed").kind, "task.message");
        // An explicit kind wins.
        let explicit: EventBody = serde_json::from_value(
            json!({ "attempt": 1, "kind": "task.warning", "message": "task.steps.plan" }),
        )
        .unwrap();
        assert_eq!(explicit.into_event().kind, "task.warning");
    }

    #[test]
    fn a_claim_reads_the_capabilities_alias_and_refuses_unknown_fields() {
        let body: ClaimBody =
            serde_json::from_value(json!({ "workerCapabilities": ["git"] })).unwrap();
        assert_eq!(body.capabilities, Some(vec!["git".to_string()]));
        assert!(serde_json::from_value::<ClaimBody>(json!({ "nope": 1 })).is_err());
        // A fence alone takes whatever else a write carries.
        let fence: FenceBody =
            serde_json::from_value(json!({ "attempt": 1, "extra": true })).unwrap();
        assert_eq!(fence.attempt, Some(1));
    }
}
