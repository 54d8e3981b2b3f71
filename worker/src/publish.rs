//! What a task's steps changed, and publishing it once: the per-step and whole-task patches,
//! the check that no step committed on its own, and the publish modes (none, branch, pr).
//!
//! Changes are measured between tree snapshots (`git add -A` then `git write-tree`), not
//! commits: steps must not commit, and a snapshot sees new, changed and deleted files alike
//! without touching the branch.
//!
//! git and gh run under the worker's subprocess policy, within the caller's [`Budget`].

use std::path::Path;
use std::time::Duration;

use contract::PublishMode;
use tokio::process::Command;

use crate::git::{GitError, git, git_raw, git_with_token, refuse_nested_repositories};
use crate::process::{self, Budget, RunError};

/// The commit identity used when the worker's own git configuration has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            name: "stepwise".into(),
            email: "stepwise@localhost".into(),
        }
    }
}

/// The tree of everything in the working copy right now (ignored files excluded).
pub async fn snapshot(repo: &Path, budget: &Budget) -> Result<String, GitError> {
    refuse_nested_repositories(repo)?;
    git(repo, &["add", "--all"], budget).await?;
    git(repo, &["write-tree"], budget).await
}

/// A binary-safe patch from one snapshot (or commit) to another; empty when equal.
pub async fn diff(repo: &Path, from: &str, to: &str, budget: &Budget) -> Result<String, GitError> {
    // No external diff and no text conversion: a step's .gitattributes picks the driver.
    let args = [
        "diff",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        from,
        to,
    ];
    let patch = git_raw(repo, &args, budget).await?;
    Ok(String::from_utf8_lossy(&patch).into_owned())
}

/// Commits an agent made on its own since `base`, newest first (`sha subject`): steps must
/// leave committing to the publish stage, so these are reported, not silently published.
pub async fn stray_commits(
    repo: &Path,
    base: &str,
    budget: &Budget,
) -> Result<Vec<String>, GitError> {
    let range = format!("{base}..HEAD");
    let log = git(repo, &["log", "--format=%h %s", &range], budget).await?;
    Ok(log.lines().map(str::to_string).collect())
}

/// What to publish and where.
#[derive(Debug, Clone)]
pub struct PublishRequest<'a> {
    pub mode: PublishMode,
    pub working_branch: &'a str,
    /// The PR's base: `prBaseBranch`, else the starting branch.
    pub base_branch: &'a str,
    pub commit_message: &'a str,
    pub pr_title: &'a str,
    pub pr_body: &'a str,
    pub identity: &'a Identity,
    /// The `gh` executable (a recorded shim in tests).
    pub gh: &'a Path,
    /// Authenticates the push (HTTPS remotes) and gh: the task's resolved `publishAuthRef`,
    /// else its `repoAuthRef`; `None` leaves both to the machine's own git and gh logins.
    pub token: Option<&'a str>,
    /// The working branch is the job's own (its name was made from the job id): whatever
    /// is on it came from an earlier attempt of this job, which lost its lease after its
    /// push, so this attempt's push replaces it. A branch the task named may hold anyone's
    /// work and is never force-pushed.
    pub own_branch: bool,
}

/// `publish_result.json`: the contract's, which the job page reads back.
pub use contract::job::PublishResult;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("gh pr create failed ({status}): {stderr}")]
    Gh { status: String, stderr: String },
    #[error("gh pr create was stopped: the job was cancelled")]
    GhCancelled,
    #[error(
        "gh pr create did not finish within {} s and was stopped: check that GitHub answers and that gh is logged in (`gh auth status`), or raise {setting} if it is only slow",
        after.as_secs()
    )]
    GhTimedOut {
        setting: &'static str,
        after: Duration,
    },
    #[error("could not run gh: {0}")]
    GhRun(RunError),
}

impl PublishError {
    /// Whether git or gh was stopped because the job was cancelled (not a failure).
    pub fn is_cancelled(&self) -> bool {
        match self {
            PublishError::Git(e) => e.is_cancelled(),
            PublishError::GhCancelled => true,
            _ => false,
        }
    }
}

/// Publishes the working copy once: `none` records a skip; `branch` commits everything and
/// pushes the working branch; `pr` does the same and opens a pull request with `gh`.
pub async fn publish(
    repo: &Path,
    request: &PublishRequest<'_>,
    budget: &Budget,
) -> Result<PublishResult, PublishError> {
    let mut result = PublishResult {
        mode: request.mode,
        status: "skipped".into(),
        branch: None,
        commit: None,
        pr_url: None,
    };
    if request.mode == PublishMode::None {
        return Ok(result);
    }
    refuse_nested_repositories(repo)?;
    git(repo, &["add", "--all"], budget).await?;
    // Both ask git a yes-or-no question by exit status; only a git that did not end by
    // itself is an error.
    let yes = |answer: Result<String, GitError>| match answer {
        Ok(_) => Ok(true),
        Err(GitError::Failed { .. }) => Ok(false),
        Err(other) => Err(other),
    };
    if yes(git(repo, &["diff", "--cached", "--quiet"], budget).await)? {
        result.status = "no_changes".into();
        return Ok(result);
    }
    let name = format!("user.name={}", request.identity.name);
    let email = format!("user.email={}", request.identity.email);
    let has_identity = yes(git(repo, &["config", "user.email"], budget).await)?;
    let mut commit: Vec<&str> = Vec::new();
    if !has_identity {
        commit.extend(["-c", &name, "-c", &email]);
    }
    commit.extend([
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        request.commit_message,
    ]);
    git(repo, &commit, budget).await?;
    let refspec = format!("HEAD:refs/heads/{}", request.working_branch);
    let mut push = vec!["push", "--quiet"];
    if request.own_branch {
        push.push("--force");
    }
    push.extend(["origin", &refspec]);
    // The token goes to where origin pushes, and nowhere else.
    let remote = match request.token {
        Some(_) => git(repo, &["remote", "get-url", "--push", "origin"], budget).await?,
        None => String::new(),
    };
    let auth = request.token.map(|token| (token, remote.as_str()));
    git_with_token(repo, &push, auth, budget).await?;
    result.branch = Some(request.working_branch.to_string());
    result.commit = Some(git(repo, &["rev-parse", "HEAD"], budget).await?);
    result.status = "pushed".into();
    if request.mode == PublishMode::Pr {
        let mut gh = Command::new(request.gh);
        // gh runs git in the checkout too (`git status`): with the worker's git settings.
        gh.envs(crate::git::HOST_GIT_ENV);
        if let Some(token) = request.token {
            // gh takes a token from GH_TOKEN before its own stored login.
            gh.env("GH_TOKEN", token);
        }
        gh.args([
            "pr",
            "create",
            "--base",
            request.base_branch,
            "--head",
            request.working_branch,
            "--title",
            request.pr_title,
            "--body",
            request.pr_body,
        ])
        .current_dir(repo);
        let output = process::output(&mut gh, budget)
            .await
            .map_err(|error| match error {
                RunError::Cancelled { .. } => PublishError::GhCancelled,
                RunError::TimedOut { after, .. } => PublishError::GhTimedOut {
                    setting: budget.setting,
                    after,
                },
                other => PublishError::GhRun(other),
            })?;
        let stderr = output.stderr_text();
        // A pull request of this branch already open (an earlier attempt opened it before
        // it lost its lease) now shows what was just pushed: it is this job's, reused.
        let existing = (!output.status.success() && stderr.contains("already exists"))
            .then(|| last_url(&stderr))
            .flatten();
        if !output.status.success() && existing.is_none() {
            return Err(PublishError::Gh {
                status: output.status.to_string(),
                stderr,
            });
        }
        // gh prints the new PR's URL as its last line.
        result.pr_url = existing.or_else(|| last_url(&String::from_utf8_lossy(&output.stdout)));
        result.status = "pr_created".into();
    }
    Ok(result)
}

fn last_url(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .rfind(|l| l.starts_with("http"))
        .map(str::to_string)
}
