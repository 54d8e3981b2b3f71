//! The worker's git against real repositories: a bare remote in a temp dir, a mirror cache,
//! and per-job checkouts.

use std::path::Path;

use worker::testing::{budget, remote, run};

use worker::git::{GitError, MirrorCache, checkout, git};

fn push_commit(root: &Path, url: &str, file: &str) -> String {
    let seed = root.join("seed");
    run(&seed, &["checkout", "--quiet", "main"]);
    std::fs::write(seed.join(file), "more\n").unwrap();
    run(&seed, &["add", "."]);
    run(&seed, &["commit", "--quiet", "-m", file]);
    run(&seed, &["push", "--quiet", url, "main"]);
    run(&seed, &["rev-parse", "HEAD"])
}

#[tokio::test]
async fn a_second_job_on_the_same_repository_reuses_the_warm_mirror() {
    let tmp = tempfile::tempdir().unwrap();
    let url = remote(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("mirrors"));

    let first = cache.refresh(&url, None, &budget()).await.unwrap();
    assert!(first.cloned);
    let job1 = checkout(
        &first.path,
        &url,
        &tmp.path().join("job1/repo"),
        None,
        "task/one",
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(job1.default_branch, "main");
    assert_eq!(job1.starting_branch, "main");

    // The remote moved on; the next job fetches into the same mirror instead of cloning.
    let head = push_commit(tmp.path(), &url, "second.txt");
    let second = cache.refresh(&url, None, &budget()).await.unwrap();
    assert!(!second.cloned);
    assert_eq!(second.path, first.path);
    let dest = tmp.path().join("job2/repo");
    let job2 = checkout(&second.path, &url, &dest, None, "task/two", &budget())
        .await
        .unwrap();
    assert_eq!(job2.base_commit, head);
    assert!(dest.join("second.txt").is_file());
    // Pushes go to the real remote, never to the cache.
    assert_eq!(
        git(&dest, &["remote", "get-url", "origin"], &budget())
            .await
            .unwrap(),
        url
    );
    assert_eq!(
        git(&dest, &["branch", "--show-current"], &budget())
            .await
            .unwrap(),
        "task/two"
    );
}

#[tokio::test]
async fn the_working_branch_starts_from_the_starting_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let url = remote(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("mirrors"));
    let mirror = cache.refresh(&url, None, &budget()).await.unwrap();
    let dest = tmp.path().join("job/repo");
    let done = checkout(
        &mirror.path,
        &url,
        &dest,
        Some("dev"),
        "feature/x",
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(done.starting_branch, "dev");
    assert_eq!(done.working_branch, "feature/x");
    assert!(dest.join("dev.txt").is_file());
    let dev_head = run(&tmp.path().join("seed"), &["rev-parse", "dev"]);
    assert_eq!(done.base_commit, dev_head);
    // The job's branch tracks nothing: a bare `git push` must not land on dev.
    assert!(
        git(
            &dest,
            &["rev-parse", "--abbrev-ref", "@{upstream}"],
            &budget()
        )
        .await
        .is_err()
    );
}

#[tokio::test]
async fn an_unknown_starting_branch_is_named_in_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    let url = remote(tmp.path());
    let cache = MirrorCache::new(tmp.path().join("mirrors"));
    let mirror = cache.refresh(&url, None, &budget()).await.unwrap();
    let error = checkout(
        &mirror.path,
        &url,
        &tmp.path().join("job/repo"),
        Some("nope"),
        "task/x",
        &budget(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, GitError::NoSuchBranch { ref branch, .. } if branch == "nope"),
        "{error}"
    );
    assert!(
        error.to_string().contains("startingBranch \"nope\""),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_repository_fails_with_gits_own_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = MirrorCache::new(tmp.path().join("mirrors"));
    let missing = tmp.path().join("missing.git");
    let error = cache
        .refresh(missing.to_str().unwrap(), None, &budget())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("clone"), "{error}");
    // Nothing half-made is left to break the next attempt.
    assert!(!cache.path_for(missing.to_str().unwrap()).exists());
}
