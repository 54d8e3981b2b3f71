//! Change notifications: what feeds the SSE streams and wakes long-polling workers.
//!
//! Every replica broadcasts its own changes in-process after they commit. On PostgreSQL a
//! relay task also hands them to `pg_notify`, batched, after the commit, and a listener
//! task re-broadcasts what *other* replicas sent; its own are recognised by the origin id
//! in the payload and skipped, having already been broadcast locally.
//!
//! Why after the commit, not inside the transaction: a transaction that notifies takes a
//! database-wide lock at commit and holds it through its WAL flush, so every notifying
//! commit of the cluster waits for the previous one's fsync (seen as `Lock:object` waits
//! on COMMIT under `stepwise bench queue`), and commits can no longer share a flush. The
//! relay sends one `pg_notify` statement for whatever accumulated in 2 ms. The cost: a
//! replica that dies between a commit and its relay loses those hints, which the periodic
//! re-checks below cover, as they cover a listener that reconnects.
//!
//! Notifications are hints, not a log: a subscriber that lags or a listener that
//! reconnects may miss some, so consumers re-read state (events after their last id, a
//! claim attempt) rather than trusting a notification's content.

use std::time::Duration;

use contract::JobId;
use sqlx::postgres::PgConnection;
use sqlx::postgres::PgListener;
use sqlx::{Connection, PgPool};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The PostgreSQL channel every replica listens on.
pub(crate) const CHANNEL: &str = "stepwise_queue";

const BROADCAST_CAPACITY: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub job_id: JobId,
    pub kind: NotificationKind,
}

impl Notification {
    pub(crate) fn new(job_id: &JobId, kind: NotificationKind) -> Self {
        Notification {
            job_id: *job_id,
            kind,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotificationKind {
    /// The job's row changed (state, lease owner, cancel request, ...).
    JobChanged,
    /// An event was appended to the job's timeline.
    EventAppended { event_id: i64 },
    /// The job may now be claimed (created or requeued): waiting workers should try.
    JobAvailable,
    /// A worker moved the task's step progress (a step planned, started or ended; see
    /// `contract::job::task::PROGRESS`), which a jobs list shows beside the row.
    StepProgress,
}

impl Notification {
    /// `job_id|kind[|event_id]`: one line of a relayed payload (see [`pack`]).
    fn encode(&self) -> String {
        match self.kind {
            NotificationKind::JobChanged => format!("{}|changed", self.job_id),
            NotificationKind::JobAvailable => format!("{}|available", self.job_id),
            NotificationKind::StepProgress => format!("{}|progress", self.job_id),
            NotificationKind::EventAppended { event_id } => {
                format!("{}|event|{event_id}", self.job_id)
            }
        }
    }

    fn decode(line: &str) -> Option<Notification> {
        let mut parts = line.split('|');
        let job_id = parts.next()?.parse().ok()?;
        let kind = match parts.next()? {
            "changed" => NotificationKind::JobChanged,
            "available" => NotificationKind::JobAvailable,
            "progress" => NotificationKind::StepProgress,
            "event" => NotificationKind::EventAppended {
                event_id: parts.next()?.parse().ok()?,
            },
            _ => return None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Notification { job_id, kind })
    }
}

/// Payloads stay under this many bytes, well inside NOTIFY's 8,000.
const PAYLOAD_BYTES: usize = 7000;

/// Packs notifications into as few NOTIFY payloads as fit: the origin on the first line,
/// then one notification per line. Every NOTIFY is an entry in PostgreSQL's queue that
/// each listening replica is woken for and reads, so one payload for many is most of
/// what relaying them costs (measured at about a seventh of the throughput of single
/// claims and completions when each notification was a NOTIFY of its own).
fn pack(origin: Uuid, notes: impl IntoIterator<Item = Notification>) -> Vec<String> {
    let head = origin.to_string();
    let mut payloads = Vec::new();
    let mut payload = head.clone();
    for note in notes {
        let line = note.encode();
        if payload.len() + 1 + line.len() > PAYLOAD_BYTES {
            payloads.push(std::mem::replace(&mut payload, head.clone()));
        }
        payload.push('\n');
        payload.push_str(&line);
    }
    if payload.len() > head.len() {
        payloads.push(payload);
    }
    payloads
}

/// A payload's origin and notifications; `None` if any line is malformed.
fn unpack(payload: &str) -> Option<(Uuid, Vec<Notification>)> {
    let mut lines = payload.split('\n');
    let origin = Uuid::parse_str(lines.next()?).ok()?;
    let notes = lines
        .map(Notification::decode)
        .collect::<Option<Vec<_>>>()?;
    Some((origin, notes))
}

/// Most notifications one relayed `pg_notify` statement carries, in as few payloads as
/// they fit.
const RELAY_BATCH: usize = 512;

/// How long the relay waits, after a notification arrives, for more to send with it.
const RELAY_LINGER: Duration = Duration::from_millis(2);

/// The in-process side: one broadcast sender, this replica's origin id and, on
/// PostgreSQL, the relay's inbox.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    sender: broadcast::Sender<Notification>,
    pub(crate) origin: Uuid,
    relay: Option<mpsc::UnboundedSender<Notification>>,
}

impl Notifier {
    pub(crate) fn new() -> Self {
        let (sender, _) = broadcast::channel(BROADCAST_CAPACITY);
        Notifier {
            sender,
            origin: Uuid::now_v7(),
            relay: None,
        }
    }

    /// Starts relaying every published notification to the other replicas through
    /// `pg_notify`, until `stop` is cancelled.
    pub(crate) fn relay_postgres(mut self, pool: PgPool, stop: CancellationToken) -> Self {
        let (relay, mut inbox) = mpsc::unbounded_channel::<Notification>();
        let origin = self.origin;
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(RELAY_BATCH);
            let mut conn: Option<PgConnection> = None;
            loop {
                let received = tokio::select! {
                    _ = stop.cancelled() => break,
                    received = inbox.recv_many(&mut batch, RELAY_BATCH) => received,
                };
                if received == 0 {
                    break;
                }
                // Linger: each relayed batch is a transaction of its own, and under a busy
                // queue one went out for every two or three notifications, which cost the
                // server about a seventh of its CPU. Other replicas hear 2 ms later.
                if batch.len() < RELAY_BATCH {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(RELAY_LINGER) => {}
                    }
                    while batch.len() < RELAY_BATCH {
                        match inbox.try_recv() {
                            Ok(note) => batch.push(note),
                            Err(_) => break,
                        }
                    }
                }
                let payloads = pack(origin, batch.drain(..));
                let sent = match conn.as_mut() {
                    Some(conn) => relay_batch(conn, &payloads).await,
                    None => match relay_connection(&pool).await {
                        Ok(fresh) => relay_batch(conn.insert(fresh), &payloads).await,
                        Err(error) => Err(error),
                    },
                };
                if let Err(error) = sent {
                    // Reconnect for the next batch: the connection may be what failed.
                    conn = None;
                    tracing::warn!(%error, lost = payloads.len(), "relaying queue notifications to other replicas failed");
                }
            }
        });
        self.relay = Some(relay);
        self
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Notification> {
        self.sender.subscribe()
    }

    /// Broadcasts changes this replica committed, and relays them to the others.
    pub(crate) fn publish(&self, notes: Vec<Notification>) {
        for note in notes {
            if let Some(relay) = &self.relay {
                // Fails only once the relay stopped, with the queue.
                let _ = relay.send(note.clone());
            }
            // An error only means nobody is subscribed right now, which is fine.
            let _ = self.sender.send(note);
        }
    }

    /// Broadcasts what another replica committed (never relayed back).
    fn rebroadcast(&self, note: Notification) {
        let _ = self.sender.send(note);
    }

    /// LISTENs before returning, so that nothing committed after `Queue::open` returns is
    /// missed; then relays other replicas' notifications until `stop` is cancelled.
    pub(crate) async fn listen_postgres(
        &self,
        pool: &PgPool,
        stop: CancellationToken,
    ) -> Result<(), sqlx::Error> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        let notifier = self.clone();
        tokio::spawn(async move {
            loop {
                let received = tokio::select! {
                    _ = stop.cancelled() => break,
                    received = listener.try_recv() => received,
                };
                match received {
                    Ok(Some(message)) => match unpack(message.payload()) {
                        Some((origin, notes)) if origin != notifier.origin => {
                            for note in notes {
                                notifier.rebroadcast(note);
                            }
                        }
                        Some(_) => {}
                        None => tracing::warn!(
                            payload = message.payload(),
                            "ignoring a malformed queue notification"
                        ),
                    },
                    // The connection dropped and was re-established (LISTEN included);
                    // whatever was sent meanwhile is lost, which the periodic re-checks of
                    // claim_wait and SSE clients cover.
                    Ok(None) => tracing::warn!("queue notification listener reconnected"),
                    Err(error) => {
                        tracing::warn!(%error, "queue notification listener failed; retrying");
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                }
            }
        });
        Ok(())
    }
}

/// The relay's own connection, outside the pool so that its session setting never leaks
/// to a queue statement. `pg_notify` gives its transaction an id, so every relayed batch
/// ends in a commit record; waiting for that record's WAL flush would buy nothing (the
/// notifications are delivered at commit, and a hint lost to a crash is covered by the
/// re-checks) and cost one fsync per batch on the cluster's busiest lock.
async fn relay_connection(pool: &PgPool) -> Result<PgConnection, sqlx::Error> {
    let mut conn = PgConnection::connect_with(&pool.connect_options()).await?;
    sqlx::query("SET synchronous_commit = off")
        .execute(&mut conn)
        .await?;
    Ok(conn)
}

async fn relay_batch(conn: &mut PgConnection, payloads: &[String]) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
        .bind(CHANNEL)
        .bind(payloads)
        .execute(conn)
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_round_trip_through_the_notify_payload() {
        let origin = Uuid::now_v7();
        let job_id: JobId = "0198c1f0-0000-7000-8000-000000000001".parse().unwrap();
        let notes: Vec<Notification> = [
            NotificationKind::JobChanged,
            NotificationKind::JobAvailable,
            NotificationKind::EventAppended { event_id: 42 },
            NotificationKind::StepProgress,
        ]
        .into_iter()
        .map(|kind| Notification { job_id, kind })
        .collect();
        let payloads = pack(origin, notes.clone());
        assert_eq!(payloads.len(), 1);
        assert_eq!(unpack(&payloads[0]), Some((origin, notes)));
        assert_eq!(unpack("nonsense"), None);
        assert_eq!(unpack(&format!("{origin}\n{job_id}|changed|extra")), None);
        assert!(pack(origin, []).is_empty());
    }

    #[test]
    fn many_notifications_split_into_payloads_that_notify_accepts() {
        let origin = Uuid::now_v7();
        let notes: Vec<Notification> = (0..1000)
            .map(|n| Notification {
                job_id: JobId::from(Uuid::from_u128(n)),
                kind: NotificationKind::EventAppended {
                    event_id: i64::MAX - n as i64,
                },
            })
            .collect();
        let payloads = pack(origin, notes.clone());
        assert!(payloads.len() > 1);
        assert!(payloads.iter().all(|p| p.len() <= PAYLOAD_BYTES));
        let back: Vec<Notification> = payloads
            .iter()
            .flat_map(|p| {
                let (from, notes) = unpack(p).unwrap();
                assert_eq!(from, origin);
                notes
            })
            .collect();
        assert_eq!(back, notes);
    }
}
