//! `QueueClient` against the real router on a real socket: every route, its answers and
//! its errors as the worker and the CLI see them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use contract::api::ClaimBody;
use contract::{EventLevel, JobEvent, JobState, NewEvent};
use futures_util::{Stream, StreamExt};
use queue::Role;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use worker::client::{ClientError, QueueClient, StatusCode};

use stepwise::testing::server::{ARTIFACT_LIMIT, start};

fn task(publish: &str, steps: &[&str]) -> Value {
    let steps: Vec<Value> = steps.iter().map(|s| json!({ "instructions": s })).collect();
    json!({
        "type": "task",
        "payload": {
            "repository": "octo/hello",
            "task": {
                "instructions": "Add a README",
                "publish": { "mode": publish },
                "steps": steps,
            }
        }
    })
}

fn claim_all() -> ClaimBody {
    ClaimBody {
        capabilities: Some(vec!["codex".into(), "git".into(), "gh".into()]),
        lease_seconds: Some(30),
        ..ClaimBody::default()
    }
}

fn event(kind: &str, message: &str) -> NewEvent {
    NewEvent {
        kind: kind.into(),
        level: EventLevel::Info,
        message: message.into(),
        payload: serde_json::Map::new(),
    }
}

#[tokio::test]
async fn create_answers_the_normalized_job_and_get_reads_it_back() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let job = operator
        .create_job(&task("pr", &["write it", "link it"]))
        .await
        .unwrap();
    assert_eq!(job.status, JobState::Queued);
    assert_eq!(job.job_type, "task");
    assert_eq!(job.required_capabilities, ["codex", "git", "gh"]);
    assert_eq!(job.created_by_user_id.as_deref(), Some("operator"));
    assert_eq!(job.payload["task"]["steps"][1]["id"], "step-2");
    assert_eq!(operator.get_job(&job.id).await.unwrap(), job);
}

#[tokio::test]
async fn an_invalid_request_is_an_api_error_with_every_field_error() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let request = json!({
        "type": "task",
        "payload": { "task": { "instructions": "x", "steps": [{ "instructions": " " }] } }
    });
    let error = operator.create_job(&request).await.unwrap_err();
    let ClientError::Api {
        status,
        code,
        errors,
        ..
    } = &error
    else {
        panic!("expected an API error, got {error:?}");
    };
    assert_eq!(*status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(code, "invalid_queue_payload");
    assert!(errors.len() >= 2, "{errors:?}");
    let paths: Vec<_> = errors.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.iter().any(|p| p.contains("repository")), "{paths:?}");
    assert!(paths.iter().any(|p| p.contains("steps")), "{paths:?}");
    for e in errors {
        assert!(
            error
                .to_string()
                .contains(&format!("\n{}: {}", e.path, e.message)),
            "{error}"
        );
    }
}

#[tokio::test]
async fn list_filters_by_status_and_pages_with_the_cursor() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(operator.create_job(&task("none", &[])).await.unwrap().id);
    }
    let running = worker.claim(&claim_all()).await.unwrap().unwrap();

    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let (page, next) = operator
            .list_jobs(None, Some("task"), Some(2), cursor.as_deref())
            .await
            .unwrap();
        assert!(page.len() <= 2);
        seen.extend(page.into_iter().map(|j| j.id));
        pages += 1;
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert!(pages >= 3, "5 jobs in pages of 2");
    ids.reverse();
    assert_eq!(seen, ids, "every job once, newest first");

    let (queued, _) = operator
        .list_jobs(Some(JobState::Queued), None, None, None)
        .await
        .unwrap();
    assert_eq!(queued.len(), 4);
    assert!(queued.iter().all(|j| j.status == JobState::Queued));
    let (only_running, _) = operator
        .list_jobs(Some(JobState::Running), None, None, None)
        .await
        .unwrap();
    assert_eq!(only_running.len(), 1);
    assert_eq!(only_running[0].id, running.id);
}

#[tokio::test]
async fn a_worker_claims_heartbeats_reports_uploads_and_completes_a_job() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let id = operator
        .create_job(&task("none", &["one"]))
        .await
        .unwrap()
        .id;

    let job = worker.claim(&claim_all()).await.unwrap().expect("a job");
    assert_eq!((job.id, job.attempt), (id, 1));
    assert_eq!(job.claimed_by.as_deref(), Some("w1"));
    assert_eq!(
        worker.claim(&claim_all()).await.unwrap(),
        None,
        "nothing left"
    );

    let beat = worker.heartbeat(&id, 1, Some(120)).await.unwrap();
    assert!(beat.lease_expires_at > job.lease_expires_at);
    let stale = worker.heartbeat(&id, 2, None).await.unwrap_err();
    assert_eq!(stale.status(), Some(StatusCode::CONFLICT));
    assert_eq!(stale.code(), Some("job_ownership_mismatch"));

    let mut started = event("task.step.started", "step 1");
    started.payload.insert("stepIndex".into(), json!(0));
    let appended = worker.append_event(&id, 1, &started).await.unwrap();
    assert_eq!(appended.kind, "task.step.started");
    assert_eq!(appended.payload["stepIndex"], 0);
    let reserved = worker
        .append_event(&id, 1, &event("job.completed", "forged"))
        .await
        .unwrap_err();
    assert_eq!(reserved.status(), Some(StatusCode::UNPROCESSABLE_ENTITY));

    let all = operator.list_events(&id, None, None).await.unwrap();
    let kinds: Vec<_> = all.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["job.created", "job.claimed", "task.step.started"]);
    let after = operator
        .list_events(&id, Some(all[0].id), Some(1))
        .await
        .unwrap();
    assert_eq!(after, [all[1].clone()]);

    let content = b"line 1\nline 2\n".to_vec();
    let artifact = worker
        .upload_artifact(&id, 1, "logs/execute.log", "text/plain", content.clone())
        .await
        .unwrap();
    assert_eq!(artifact.name, "logs/execute.log");
    assert_eq!(artifact.size, content.len() as u64);
    assert_eq!(artifact.content_type, "text/plain");
    let listed = operator.list_artifacts(&id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0], artifact);
    let downloaded = operator.download_artifact(&id, &artifact.id).await.unwrap();
    assert_eq!(downloaded, content);
    let too_big = worker
        .upload_artifact(
            &id,
            1,
            "big.bin",
            "application/octet-stream",
            vec![0; ARTIFACT_LIMIT as usize + 1],
        )
        .await
        .unwrap_err();
    assert_eq!(
        too_big.status(),
        Some(StatusCode::PAYLOAD_TOO_LARGE),
        "{too_big}"
    );
    let missing = operator.download_artifact(&id, "nope").await.unwrap_err();
    assert_eq!(missing.status(), Some(StatusCode::NOT_FOUND));

    let done = worker.complete(&id, 1, Some("done")).await.unwrap();
    assert_eq!(done.status, JobState::Succeeded);
    assert_eq!(done.result_summary.as_deref(), Some("done"));
    let late = worker.fail(&id, 1, "too late", false).await.unwrap_err();
    assert_eq!(late.status(), Some(StatusCode::CONFLICT), "{late}");
}

#[tokio::test]
async fn a_worker_completes_a_job_and_takes_the_next_in_one_call() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let first = operator.create_job(&task("none", &["one"])).await.unwrap();
    let second = operator.create_job(&task("none", &["two"])).await.unwrap();
    let held = worker.claim(&claim_all()).await.unwrap().expect("a job");
    assert_eq!(held.id, first.id);

    // A stale attempt is refused and claims nothing.
    let stale = worker
        .complete_and_claim(&first.id, 2, Some("done"), &claim_all())
        .await
        .unwrap_err();
    assert_eq!(stale.status(), Some(StatusCode::CONFLICT), "{stale}");
    assert_eq!(stale.code(), Some("job_ownership_mismatch"));
    // A claim it cannot make is named inside `claim`, and nothing is written.
    let mut no_lease = claim_all();
    no_lease.lease_seconds = Some(0);
    let refused = worker
        .complete_and_claim(&first.id, 1, Some("done"), &no_lease)
        .await
        .unwrap_err();
    let ClientError::Api { status, errors, .. } = &refused else {
        panic!("expected an API error, got {refused:?}");
    };
    assert_eq!(*status, StatusCode::UNPROCESSABLE_ENTITY);
    let paths: Vec<_> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["claim.leaseSeconds"]);
    let (queued, _) = operator
        .list_jobs(Some(JobState::Queued), None, None, None)
        .await
        .unwrap();
    assert_eq!(queued.iter().map(|j| j.id).collect::<Vec<_>>(), [second.id]);

    let answer = worker
        .complete_and_claim(&first.id, 1, Some("done"), &claim_all())
        .await
        .unwrap();
    assert_eq!(answer.completed.id, first.id);
    assert_eq!(answer.completed.status, JobState::Succeeded);
    // Its id and state only: the rest is the job's to read.
    let done = operator.get_job(&first.id).await.unwrap();
    assert_eq!(done.result_summary.as_deref(), Some("done"));
    let next = answer.job.expect("the second job");
    assert_eq!((next.id, next.attempt), (second.id, 1));
    assert_eq!(next.claimed_by.as_deref(), Some("w1"));

    // Nothing left: the claim waits its `waitSeconds`, then answers no job.
    let mut waiting = claim_all();
    waiting.wait_seconds = Some(0.2);
    let last = worker
        .complete_and_claim(&second.id, 1, None, &waiting)
        .await
        .unwrap();
    assert_eq!(last.completed.status, JobState::Succeeded);
    assert_eq!(last.job, None);
}

#[tokio::test]
async fn a_retryable_failure_requeues_and_a_final_one_fails_the_job() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let id = operator.create_job(&task("none", &[])).await.unwrap().id;
    worker.claim(&claim_all()).await.unwrap().expect("a job");
    let retried = worker.fail(&id, 1, "network blip", true).await.unwrap();
    assert_eq!(retried.status, JobState::Queued);
    assert_eq!(retried.error_message.as_deref(), Some("network blip"));

    let other = operator.create_job(&task("none", &[])).await.unwrap().id;
    let claimed = worker.claim(&claim_all()).await.unwrap().expect("a job");
    assert_eq!(claimed.id, other, "the retried job waits for its backoff");
    let failed = worker.fail(&other, 1, "bad repo", false).await.unwrap();
    assert_eq!(failed.status, JobState::Failed);
}

#[tokio::test]
async fn cancel_is_immediate_when_queued_and_acknowledged_by_the_worker_when_running() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;

    let queued = operator.create_job(&task("none", &[])).await.unwrap().id;
    let cancelled = operator.cancel_job(&queued, Some("typo")).await.unwrap();
    assert_eq!(cancelled.status, JobState::Cancelled);
    assert_eq!(cancelled.cancel_reason.as_deref(), Some("typo"));

    let running = operator.create_job(&task("none", &[])).await.unwrap().id;
    worker.claim(&claim_all()).await.unwrap().expect("a job");
    let marked = operator.cancel_job(&running, None).await.unwrap();
    assert_eq!(marked.status, JobState::Running);
    assert!(marked.cancel_requested());
    assert_eq!(marked.cancel_reason, None);
    let beat = worker.heartbeat(&running, 1, None).await.unwrap();
    assert!(beat.cancel_requested(), "the heartbeat tells the worker");
    let acked = worker.ack_cancel(&running, 1).await.unwrap();
    assert_eq!(acked.status, JobState::Cancelled);
    assert_eq!(acked.claimed_by, None);

    let finished = operator.cancel_job(&running, None).await.unwrap();
    assert_eq!(
        finished.status,
        JobState::Cancelled,
        "cancelling twice is harmless"
    );
}

#[tokio::test]
async fn unknown_jobs_bad_tokens_and_wrong_roles_are_told_apart() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let viewer = server.user(Role::Viewer).await;
    let worker = server.worker("w1").await;
    let missing = operator
        .get_job(&"0190a000-0000-7000-8000-000000000000".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(
        (missing.status(), missing.code()),
        (Some(StatusCode::NOT_FOUND), Some("job_not_found"))
    );
    let stranger = QueueClient::new(&server.url(), "swu_not-a-real-token").unwrap();
    let refused = stranger
        .list_jobs(None, None, None, None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some("auth_failed"));
    assert!(!refused.to_string().contains("swu_not-a-real-token"));
    let read_only = viewer.create_job(&task("none", &[])).await.unwrap_err();
    assert_eq!(read_only.code(), Some("not_authorized"));
    let not_a_worker = operator.claim(&claim_all()).await.unwrap_err();
    assert_eq!(not_a_worker.code(), Some("worker_not_authorized"));
    let not_a_user = worker.list_jobs(None, None, None, None).await.unwrap_err();
    assert_eq!(not_a_user.status(), Some(StatusCode::FORBIDDEN));
}

#[tokio::test]
async fn a_long_poll_claim_wakes_when_a_job_is_created() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let params = ClaimBody {
        wait_seconds: Some(10.0),
        ..claim_all()
    };
    let waiting = tokio::spawn(async move { worker.claim(&params).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "nothing to claim yet: it waits");
    let id = operator.create_job(&task("none", &[])).await.unwrap().id;
    let claimed = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the claim wakes long before its 10 s wait")
        .unwrap()
        .unwrap()
        .expect("the new job");
    assert_eq!(claimed.id, id);
}

/// A TCP relay between the client and the server that can cut every open connection,
/// and records what the client sent, to see the `Last-Event-ID` of a reconnect.
struct Relay {
    url: String,
    sent: Arc<Mutex<String>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

impl Relay {
    async fn to(upstream: std::net::SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let sent = Arc::new(Mutex::new(String::new()));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let sent = sent.clone();
            let connections = connections.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        continue;
                    };
                    let relay = tokio::spawn(pipe(client, server, sent.clone()));
                    connections.lock().unwrap().push(relay);
                }
            }
        });
        Relay {
            url,
            sent,
            connections,
            accept,
        }
    }

    /// Drops every open connection, as a restarting server or a flaky network would.
    fn cut(&self) {
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    /// The `Last-Event-ID` headers the client sent, in order (and nothing else: the
    /// requests hold the token).
    fn last_event_ids(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("last-event-id")
                    .then(|| value.trim().to_string())
            })
            .collect()
    }
}

async fn pipe(client: TcpStream, server: TcpStream, sent: Arc<Mutex<String>>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let up = async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from_client.read(&mut buf).await {
            if n == 0 {
                break;
            }
            sent.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
            if to_server.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    let down = async move {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
    };
    tokio::join!(up, down);
}

/// The next event, skipping the reports of a dropped connection the stream recovers from.
async fn next_event(
    stream: &mut (impl Stream<Item = Result<JobEvent, ClientError>> + Unpin),
) -> JobEvent {
    let deadline = Duration::from_secs(10);
    tokio::time::timeout(deadline, async {
        loop {
            match stream.next().await {
                Some(Ok(event)) => return event,
                Some(Err(error)) if error.is_retryable() => continue,
                other => panic!("expected an event, got {other:?}"),
            }
        }
    })
    .await
    .expect("an event within 10 s")
}

#[tokio::test]
async fn the_event_stream_pushes_live_events_and_resumes_from_last_event_id_after_a_drop() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let id = operator.create_job(&task("none", &[])).await.unwrap().id;
    worker.claim(&claim_all()).await.unwrap().expect("a job");

    let relay = Relay::to(server.addr).await;
    let token = server
        .token("follower", queue::TokenKind::User, Some(Role::Viewer))
        .await;
    let follower = QueueClient::new(&relay.url, &token).unwrap();
    let mut stream = follower.stream_events(&id, None);

    assert_eq!(next_event(&mut stream).await.kind, "job.created");
    assert_eq!(next_event(&mut stream).await.kind, "job.claimed");
    let live = worker
        .append_event(&id, 1, &event("task.step.started", "step 1"))
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut stream).await,
        live,
        "pushed while streaming"
    );

    relay.cut();
    let missed = worker
        .append_event(&id, 1, &event("task.step.finished", "step 1 done"))
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut stream).await,
        missed,
        "the event appended while disconnected arrives after the reconnect"
    );
    assert_eq!(
        relay.last_event_ids(),
        [live.id.to_string()],
        "the first connect starts from the beginning; the reconnect after the last event delivered"
    );
    let next = worker
        .append_event(&id, 1, &event("task.publish.started", "publishing"))
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut stream).await,
        next,
        "nothing delivered twice"
    );
}

#[tokio::test]
async fn the_event_stream_starts_after_the_given_event_and_ends_on_an_unknown_job() {
    let server = start().await;
    let operator = server.user(Role::Operator).await;
    let worker = server.worker("w1").await;
    let id = operator.create_job(&task("none", &[])).await.unwrap().id;
    worker.claim(&claim_all()).await.unwrap().expect("a job");
    let events = operator.list_events(&id, None, None).await.unwrap();
    let mut stream = operator.stream_events(&id, Some(events[0].id));
    assert_eq!(next_event(&mut stream).await, events[1]);

    let mut unknown = operator.stream_events(
        &"0190a000-0000-7000-8000-000000000000".parse().unwrap(),
        None,
    );
    let error = tokio::time::timeout(Duration::from_secs(5), unknown.next())
        .await
        .unwrap()
        .expect("an error item")
        .unwrap_err();
    assert_eq!(error.code(), Some("job_not_found"));
    let end = tokio::time::timeout(Duration::from_secs(5), unknown.next())
        .await
        .unwrap();
    assert!(end.is_none(), "a 404 ends the stream");
}
