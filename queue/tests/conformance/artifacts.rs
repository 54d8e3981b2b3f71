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
    let on_disk = h
        .artifacts
        .path()
        .join(&job.id)
        .join("logs/steps/step-0001.log");
    assert_eq!(std::fs::read(&on_disk).unwrap(), bytes);
    let (opened, path) = h.queue.open_artifact(&job.id, STEP_LOG).await.unwrap();
    assert_eq!(opened, artifact);
    assert_eq!(path, on_disk);

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
    let (_, path) = h.queue.open_artifact(&job.id, STEP_LOG).await.unwrap();
    assert_eq!(std::fs::read(path).unwrap(), b"complete output");
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
    assert!(!h.artifacts.path().join(&job.id).join("big.log").exists());
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
