//! Patches and publishing against a real bare remote, with the recorded `gh` shim.

use std::path::{Path, PathBuf};

use worker::testing::{budget, gh_shim, remote, run};

use contract::PublishMode;
use worker::git::{MirrorCache, checkout, git};
use worker::publish::{
    Identity, PublishError, PublishRequest, diff, publish, snapshot, stray_commits,
};

struct Job {
    _tmp: tempfile::TempDir,
    remote: String,
    repo: PathBuf,
    base: String,
    gh_log: PathBuf,
    /// The gh shim, wrapped so that it records into this job's `gh_log`.
    gh: PathBuf,
}

/// The common remote, checked out from main on the working branch `task/x`.
async fn job() -> Job {
    let tmp = tempfile::tempdir().unwrap();
    let remote = remote(tmp.path());
    let mirror = MirrorCache::new(tmp.path().join("mirrors"))
        .refresh(&remote, None, &budget())
        .await
        .unwrap();
    let repo = tmp.path().join("job/repo");
    let done = checkout(&mirror.path, &remote, &repo, None, "task/x", &budget())
        .await
        .unwrap();
    let (gh, gh_log) = gh_shim(tmp.path());
    Job {
        remote,
        repo,
        base: done.base_commit,
        gh_log,
        gh,
        _tmp: tmp,
    }
}

fn request<'a>(mode: PublishMode, identity: &'a Identity, gh: &'a Path) -> PublishRequest<'a> {
    PublishRequest {
        mode,
        working_branch: "task/x",
        base_branch: "main",
        commit_message: "Add a greeting",
        pr_title: "Add a greeting",
        pr_body: "Steps:\n1. greet",
        identity,
        gh,
        token: None,
        own_branch: true,
    }
}

/// The next attempt's checkout of the same job: the same remote and working branch, in a
/// workspace of its own, with a change of its own.
async fn next_attempt(job: &Job, change: &str) -> PathBuf {
    let mirror = MirrorCache::new(job._tmp.path().join("mirrors"))
        .refresh(&job.remote, None, &budget())
        .await
        .unwrap();
    let repo = job._tmp.path().join("attempt-2/repo");
    checkout(&mirror.path, &job.remote, &repo, None, "task/x", &budget())
        .await
        .unwrap();
    std::fs::write(repo.join("greeting.txt"), change).unwrap();
    repo
}

/// A gh that answers as gh does when the branch already has an open pull request, or with
/// another failure that names a URL.
fn failing_gh(job: &Job, stderr: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let gh = job._tmp.path().join("gh-failing");
    std::fs::write(
        &gh,
        format!("#!/bin/sh\nprintf '%s\\n' '{stderr}' >&2\nexit 1\n"),
    )
    .unwrap();
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    gh
}

#[tokio::test]
async fn each_step_gets_its_own_patch_and_stray_commits_are_found() {
    let job = job().await;
    let before = snapshot(&job.repo, &budget()).await.unwrap();
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    std::fs::remove_file(job.repo.join("README.md")).unwrap();
    let after = snapshot(&job.repo, &budget()).await.unwrap();
    let patch = diff(&job.repo, &before, &after, &budget()).await.unwrap();
    assert!(
        patch.contains("+++ b/greeting.txt") && patch.contains("+hi"),
        "{patch}"
    );
    assert!(patch.contains("deleted file mode"), "{patch}");
    assert_eq!(
        diff(&job.repo, &after, &after, &budget()).await.unwrap(),
        ""
    );
    assert!(
        stray_commits(&job.repo, &job.base, &budget())
            .await
            .unwrap()
            .is_empty()
    );

    run(&job.repo, &["commit", "--quiet", "-m", "agent committed"]);
    let stray = stray_commits(&job.repo, &job.base, &budget())
        .await
        .unwrap();
    assert_eq!(stray.len(), 1);
    assert!(stray[0].ends_with(" agent committed"), "{stray:?}");
    // The whole task's patch still measures from the base, whatever the agent did.
    let now = snapshot(&job.repo, &budget()).await.unwrap();
    let total = diff(&job.repo, &job.base, &now, &budget()).await.unwrap();
    assert!(total.contains("+hi"), "{total}");
}

#[tokio::test]
async fn branch_mode_commits_everything_and_pushes_the_working_branch() {
    let job = job().await;
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    let identity = Identity::default();
    let gh = job.gh.clone();
    let result = publish(
        &job.repo,
        &request(PublishMode::Branch, &identity, &gh),
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(result.status, "pushed");
    assert_eq!(result.branch.as_deref(), Some("task/x"));
    let pushed = run(Path::new(&job.remote), &["rev-parse", "refs/heads/task/x"]);
    assert_eq!(result.commit.as_deref(), Some(pushed.as_str()));
    let subject = run(
        Path::new(&job.remote),
        &["log", "-1", "--format=%s", "task/x"],
    );
    assert_eq!(subject, "Add a greeting");
    assert!(!job.gh_log.exists(), "branch mode never calls gh");
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["mode"], "branch");
    assert!(json.get("prUrl").is_none());
}

#[tokio::test]
async fn pr_mode_pushes_and_opens_a_pull_request_with_gh() {
    let job = job().await;
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    let identity = Identity::default();
    let gh = job.gh.clone();
    let result = publish(
        &job.repo,
        &request(PublishMode::Pr, &identity, &gh),
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(result.status, "pr_created");
    assert_eq!(
        result.pr_url.as_deref(),
        Some("https://github.com/octo/hello/pull/7")
    );
    let calls = std::fs::read_to_string(&job.gh_log).unwrap();
    assert_eq!(
        calls.trim_end(),
        r"pr create --base main --head task/x --title Add\ a\ greeting --body $'Steps:\n1. greet'"
    );
    let pushed = git(
        Path::new(&job.remote),
        &["rev-parse", "--verify", "refs/heads/task/x"],
        &budget(),
    )
    .await;
    assert!(pushed.is_ok());
}

#[tokio::test]
async fn a_task_that_changed_nothing_publishes_nothing() {
    let job = job().await;
    let identity = Identity::default();
    let gh = job.gh.clone();
    let result = publish(
        &job.repo,
        &request(PublishMode::Pr, &identity, &gh),
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(result.status, "no_changes");
    assert!(
        git(
            Path::new(&job.remote),
            &["rev-parse", "--verify", "refs/heads/task/x"],
            &budget()
        )
        .await
        .is_err()
    );
    let skipped = publish(
        &job.repo,
        &request(PublishMode::None, &identity, &gh),
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(skipped.status, "skipped");
}

#[tokio::test]
async fn a_missing_gh_is_a_clear_error() {
    let job = job().await;
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    let identity = Identity::default();
    let gh = job.repo.join("no-such-gh");
    let error = publish(
        &job.repo,
        &request(PublishMode::Pr, &identity, &gh),
        &budget(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, PublishError::GhRun(_)), "{error}");
    assert!(error.to_string().contains("no-such-gh"), "{error}");
}

#[tokio::test]
async fn a_publish_token_reaches_gh_through_its_environment() {
    let job = job().await;
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    let identity = Identity::default();
    let gh = job.gh.clone();
    let mut request = request(PublishMode::Pr, &identity, &gh);
    request.token = Some("publish-secret-123");
    let result = publish(&job.repo, &request, &budget()).await.unwrap();
    assert_eq!(result.status, "pr_created");
    let calls = std::fs::read_to_string(&job.gh_log).unwrap();
    assert!(calls.contains("GH_TOKEN=publish-secret-123"), "{calls}");
    assert!(
        !calls
            .lines()
            .any(|l| l.starts_with("pr create") && l.contains("publish-secret")),
        "the token must not be in gh's argv: {calls}"
    );
}

#[tokio::test]
async fn a_later_attempt_replaces_what_an_earlier_one_pushed_to_the_jobs_own_branch() {
    let job = job().await;
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    let identity = Identity::default();
    let gh = job.gh.clone();
    let first = publish(
        &job.repo,
        &request(PublishMode::Branch, &identity, &gh),
        &budget(),
    )
    .await
    .unwrap();
    let second_repo = next_attempt(&job, "hello\n").await;
    let second = publish(
        &second_repo,
        &request(PublishMode::Branch, &identity, &gh),
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(second.status, "pushed");
    assert_ne!(first.commit, second.commit);
    let tip = run(Path::new(&job.remote), &["rev-parse", "refs/heads/task/x"]);
    assert_eq!(second.commit.as_deref(), Some(tip.as_str()));
}

#[tokio::test]
async fn a_branch_the_task_named_is_never_force_pushed() {
    let job = job().await;
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    let identity = Identity::default();
    let gh = job.gh.clone();
    let mut named = request(PublishMode::Branch, &identity, &gh);
    named.own_branch = false;
    let first = publish(&job.repo, &named, &budget()).await.unwrap();
    let second_repo = next_attempt(&job, "hello\n").await;
    let refused = publish(&second_repo, &named, &budget()).await;
    assert!(refused.is_err(), "{refused:?}");
    let tip = run(Path::new(&job.remote), &["rev-parse", "refs/heads/task/x"]);
    assert_eq!(first.commit.as_deref(), Some(tip.as_str()));
}

#[tokio::test]
async fn an_open_pull_request_of_the_branch_is_reused_and_other_gh_failures_are_not() {
    let job = job().await;
    std::fs::write(job.repo.join("greeting.txt"), "hi\n").unwrap();
    let identity = Identity::default();
    let exists = failing_gh(
        &job,
        "a pull request for branch \"task/x\" into branch \"main\" already exists:\nhttps://github.com/octo/hello/pull/9",
    );
    let result = publish(
        &job.repo,
        &request(PublishMode::Pr, &identity, &exists),
        &budget(),
    )
    .await
    .unwrap();
    assert_eq!(result.status, "pr_created");
    assert_eq!(
        result.pr_url.as_deref(),
        Some("https://github.com/octo/hello/pull/9")
    );
    std::fs::write(job.repo.join("greeting.txt"), "again\n").unwrap();
    let refused = failing_gh(
        &job,
        "HTTP 401: Bad credentials\nhttps://api.github.com/graphql",
    );
    let error = publish(
        &job.repo,
        &request(PublishMode::Pr, &identity, &refused),
        &budget(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, PublishError::Gh { .. }), "{error}");
}
