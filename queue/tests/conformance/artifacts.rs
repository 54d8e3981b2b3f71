//! Artifacts: bytes on disk, metadata in the store.

use queue::Fence;

use crate::harness::*;

const STEP_LOG: &str = "logs/steps/step-0001.log";

fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn running(h: &Harness) -> (contract::Job, Fence) {
    let job = h.create(Spec::default()).await;
    let claimed = h.claim_exactly("w1", &job).await;
    let f = fence(&claimed);
    (job, f)
}

pub async fn artifact_is_stored_with_its_size_and_sha256(h: Harness) {
    let (job, f) = running(&h).await;
    let bytes = b"step one output\n";
    let artifact = h
        .queue
        .add_artifact(&job.id, &f, STEP_LOG, "text/plain", bytes)
        .await
        .unwrap();
    assert_eq!(artifact.job_id, job.id);
    assert_eq!(artifact.name, STEP_LOG);
    assert_eq!(artifact.size, bytes.len() as u64);
    assert_eq!(artifact.content_type, "text/plain");
    assert_eq!(artifact.sha256, sha256(bytes));
    assert_eq!(artifact.created_at, start_time());
    let (opened, content) = h.queue.open_artifact(&job.id, STEP_LOG).await.unwrap();
    assert_eq!(opened, artifact);
    assert_eq!(read_all(content).await, bytes);
    // Where the bytes live: a file under the data directory on SQLite (one machine); the
    // database on PostgreSQL, so that every replica serves them and no disk holds them.
    let on_disk = h
        .artifacts
        .path()
        .join(job.id.to_string())
        .join("logs/steps/step-0001.log");
    match h.backend {
        Backend::Sqlite => assert_eq!(std::fs::read(&on_disk).unwrap(), bytes),
        Backend::Postgres => assert!(!h.artifacts.path().join(job.id.to_string()).exists()),
    }

    let other = h
        .queue
        .add_artifact(&job.id, &f, "task_context.json", "", b"{}")
        .await
        .unwrap();
    assert_eq!(other.content_type, "application/octet-stream");
    let listed = h.queue.list_artifacts(&job.id).await.unwrap();
    assert_eq!(listed, [artifact, other]);
}

pub async fn reuploading_an_artifact_replaces_it(h: Harness) {
    let (job, f) = running(&h).await;
    let first = h
        .queue
        .add_artifact(&job.id, &f, STEP_LOG, "text/plain", b"partial")
        .await
        .unwrap();
    h.advance(std::time::Duration::from_secs(30));
    let second = h
        .queue
        .add_artifact(&job.id, &f, STEP_LOG, "text/x-log", b"complete output")
        .await
        .unwrap();
    assert_eq!(second.id, first.id);
    assert_eq!(second.size, 15);
    assert_eq!(second.sha256, sha256(b"complete output"));
    assert_eq!(second.content_type, "text/x-log");
    assert_eq!(
        second.created_at,
        start_time() + std::time::Duration::from_secs(30)
    );
    assert_eq!(h.queue.list_artifacts(&job.id).await.unwrap(), [second]);
    let (_, content) = h.queue.open_artifact(&job.id, STEP_LOG).await.unwrap();
    assert_eq!(read_all(content).await, b"complete output");
}

/// Every byte of an artifact, as a download streams it.
async fn read_all(content: queue::ArtifactContent) -> Vec<u8> {
    use futures_util::StreamExt;
    let mut bytes = Vec::new();
    let mut pieces = content.into_stream();
    while let Some(piece) = pieces.next().await {
        bytes.extend(piece.unwrap());
    }
    bytes
}

pub async fn a_large_artifact_goes_in_and_out_in_pieces_through_any_replica(h: Harness) {
    let (job, f) = running(&h).await;
    // Over four of PostgreSQL's 256 KiB chunks and not a multiple of them: several reads,
    // a short last chunk.
    let bytes: Vec<u8> = (0..1_100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let incoming = h.queue.receive_artifact(&bytes[..]).await.unwrap();
    let artifact = h
        .queue
        .store_artifact(&job.id, &f, "big/output.bin", "", incoming)
        .await
        .unwrap();
    assert_eq!(artifact.size, bytes.len() as u64);
    assert_eq!(artifact.sha256, sha256(&bytes));
    // Another replica on the same database serves the same bytes.
    let replica = h.queue_with(|_| {}).await;
    let (_, content) = replica
        .open_artifact(&job.id, "big/output.bin")
        .await
        .unwrap();
    assert_eq!(read_all(content).await, bytes);
    let (_, start, more) = replica
        .read_artifact(&job.id, &artifact.id, 300_000)
        .await
        .unwrap();
    assert_eq!(start, bytes[..300_000]);
    assert!(more);
    // Replaced by a shorter one: no byte of the old is left behind.
    let incoming = h.queue.receive_artifact(&b"short"[..]).await.unwrap();
    h.queue
        .store_artifact(&job.id, &f, "big/output.bin", "", incoming)
        .await
        .unwrap();
    let (_, content) = replica
        .open_artifact(&job.id, "big/output.bin")
        .await
        .unwrap();
    assert_eq!(read_all(content).await, b"short");
}

pub async fn artifact_names_that_could_escape_are_refused(h: Harness) {
    let (job, f) = running(&h).await;
    for name in [
        "../escape.log",
        "logs/../../escape.log",
        "/etc/escape.log",
        "logs\\escape.log",
        "logs/\0.log",
        "",
        "logs//x.log",
    ] {
        assert_code(
            h.queue
                .add_artifact(&job.id, &f, name, "text/plain", b"x")
                .await,
            "invalid_queue_payload",
        );
    }
    assert!(h.queue.list_artifacts(&job.id).await.unwrap().is_empty());
    let parent = h.artifacts.path().parent().unwrap();
    assert!(!parent.join("escape.log").exists());
    assert!(!h.artifacts.path().join("escape.log").exists());
}

pub async fn artifact_paths_that_collide_are_refused(h: Harness) {
    let (job, f) = running(&h).await;
    h.queue
        .add_artifact(&job.id, &f, "logs/a.log", "", b"a")
        .await
        .unwrap();
    assert_code(
        h.queue.add_artifact(&job.id, &f, "logs", "", b"b").await,
        "invalid_queue_payload",
    );
    assert_code(
        h.queue
            .add_artifact(&job.id, &f, "logs/a.log/b", "", b"c")
            .await,
        "invalid_queue_payload",
    );
    let names: Vec<String> = h
        .queue
        .list_artifacts(&job.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["logs/a.log"]);
}

pub async fn oversized_artifact_is_refused(h: Harness) {
    let queue = h.queue_with(|c| c.max_artifact_bytes = 16).await;
    let job = queue
        .create_job(&Spec::default().json(), None)
        .await
        .unwrap();
    let claimed = queue.claim(&request("w1")).await.unwrap().unwrap();
    let f = fence(&claimed);
    queue
        .add_artifact(&job.id, &f, "fits.log", "", &[b'x'; 16])
        .await
        .unwrap();
    assert_code(
        queue
            .add_artifact(&job.id, &f, "big.log", "", &[b'x'; 17])
            .await,
        "payload_too_large",
    );
    let names: Vec<String> = queue
        .list_artifacts(&job.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["fits.log"]);
    assert!(
        !h.artifacts
            .path()
            .join(job.id.to_string())
            .join("big.log")
            .exists()
    );
}

pub async fn unknown_artifact_is_not_found(h: Harness) {
    let (job, _) = running(&h).await;
    assert_code(
        h.queue.open_artifact(&job.id, "missing.log").await,
        "artifact_not_found",
    );
    assert_code(
        h.queue.open_artifact(&job.id, "../missing.log").await,
        "artifact_not_found",
    );
}

/// A page shows the start of an artifact, found by its id, and says when there is more.
pub async fn an_artifact_is_read_by_id_up_to_a_limit(h: Harness) {
    let (job, f) = running(&h).await;
    let patch = h
        .queue
        .add_artifact(
            &job.id,
            &f,
            "patches/changes.patch",
            "text/x-diff",
            b"+one\n+two\n",
        )
        .await
        .unwrap();
    let (found, bytes, more) = h
        .queue
        .read_artifact(&job.id, &patch.id, 1024)
        .await
        .unwrap();
    assert_eq!(found, patch);
    assert_eq!((bytes.as_slice(), more), (&b"+one\n+two\n"[..], false));
    let (_, head, more) = h.queue.read_artifact(&job.id, &patch.id, 4).await.unwrap();
    assert_eq!((head.as_slice(), more), (&b"+one"[..], true));
    assert_code(
        h.queue.read_artifact(&job.id, "no-such-id", 10).await,
        "artifact_not_found",
    );
    let other = h.create(Spec::default()).await;
    assert_code(
        h.queue.read_artifact(&other.id, &patch.id, 10).await,
        "artifact_not_found",
    );
}

pub async fn an_artifact_name_part_too_long_for_a_file_system_is_refused(h: Harness) {
    let (job, f) = running(&h).await;
    let longest = format!("logs/{}", "a".repeat(255));
    h.queue
        .add_artifact(&job.id, &f, &longest, "text/plain", b"x")
        .await
        .expect("255 bytes is every file system's limit, and allowed");
    for name in [
        format!(
            "</title><img src=x onerror=alert(1)>{}.log",
            "b".repeat(250)
        ),
        format!("logs/{}", "c".repeat(256)),
        format!("{}/x.log", "é".repeat(128)),
    ] {
        let err = assert_code(
            h.queue
                .add_artifact(&job.id, &f, &name, "text/plain", b"x")
                .await,
            "invalid_queue_payload",
        );
        assert!(err.to_string().contains("at most 255 bytes"), "{err}");
    }
    assert_eq!(h.queue.list_artifacts(&job.id).await.unwrap().len(), 1);
}
