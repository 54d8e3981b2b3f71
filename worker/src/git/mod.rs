//! Git as the worker uses it: one bare mirror per repository, kept warm between jobs, a
//! clone per job made from that mirror (local, so hard links instead of a download), and
//! the job's branches. Always the git CLI, as the user's own machine has it, never a library.
//! Every git runs under the worker's subprocess policy ([`crate::process`]), within the
//! stage's [`Budget`]: a hung clone or push is stopped by a cancel or the stage's timeout.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use contract::JobId;
use sha2::{Digest, Sha256};
use tokio::process::Command;

use crate::process::{self, Budget, RunError};

mod credentials;
mod guard;

use credentials::{TOKEN_ENV, credential_helper};

pub use guard::{HOST_GIT_ENV, nested_repositories, refuse_nested_repositories};

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args} failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: String,
        stderr: String,
    },
    #[error("git {args} was stopped: the job was cancelled")]
    Cancelled { args: String },
    #[error(
        "git {args} did not finish within {} s and was stopped: check that the remote answers, or raise {setting} if it is only slow",
        after.as_secs()
    )]
    TimedOut {
        args: String,
        setting: &'static str,
        after: Duration,
    },
    #[error(transparent)]
    Run(RunError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("startingBranch {branch:?} does not exist in {repository}")]
    NoSuchBranch { branch: String, repository: String },
    #[error("{repository} has no default branch (an empty repository?)")]
    NoDefaultBranch { repository: String },
    #[error(
        "the checkout holds a git repository of a step's ({}): the worker's own git, which runs outside the sandbox, would run its hooks and settings, so nothing more is done with this checkout; a step may clone or init repositories in $TMPDIR, not inside the checkout",
        found.join(", ")
    )]
    NestedRepository { found: Vec<String> },
}

impl GitError {
    /// Whether git was stopped because the job was cancelled (not a failure).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, GitError::Cancelled { .. })
    }

    /// Turns a run that did not end by itself into the error that says so.
    pub(crate) fn from_run(error: RunError, args: String, budget: &Budget) -> GitError {
        match error {
            RunError::Cancelled { .. } => GitError::Cancelled { args },
            RunError::TimedOut { after, .. } => GitError::TimedOut {
                args,
                setting: budget.setting,
                after,
            },
            other => GitError::Run(other),
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |source| GitError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Runs git in `dir` and returns its trimmed stdout. Prompts are off: a worker has no one
/// to type a password, and a waiting prompt would hang the job until its timeout.
pub async fn git(dir: &Path, args: &[&str], budget: &Budget) -> Result<String, GitError> {
    git_with_token(dir, args, None, budget).await
}

/// Runs git in `dir` and returns its whole stdout, as it is (a patch must keep its bytes).
pub async fn git_raw(dir: &Path, args: &[&str], budget: &Budget) -> Result<Vec<u8>, GitError> {
    let mut command = Command::new("git");
    command.args(args).current_dir(dir);
    run(command, args, budget).await
}

async fn run(mut command: Command, args: &[&str], budget: &Budget) -> Result<Vec<u8>, GitError> {
    command.env("GIT_TERMINAL_PROMPT", "0").envs(HOST_GIT_ENV);
    let output = process::output(&mut command, budget)
        .await
        .map_err(|e| GitError::from_run(e, args.join(" "), budget))?;
    if !output.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            status: output.status.to_string(),
            stderr: output.stderr_text(),
        });
    }
    Ok(output.stdout)
}

/// [`git`], authenticating `url` (the remote the command talks to) with `token` when there
/// is one (a task's resolved `repoAuthRef` or `publishAuthRef`).
pub async fn git_with_token(
    dir: &Path,
    args: &[&str],
    auth: Option<(&str, &str)>,
    budget: &Budget,
) -> Result<String, GitError> {
    let mut command = Command::new("git");
    if let Some((token, url)) = auth
        && let Some(helper) = credential_helper(url)
    {
        command.args(helper).env(TOKEN_ENV, token);
    }
    command.args(args).current_dir(dir);
    let stdout = run(command, args, budget).await?;
    Ok(String::from_utf8_lossy(&stdout).trim().to_string())
}

/// Where a task's `repository` is cloned from: a GitHub `owner/name` on `github`
/// (for example `https://github.com`), anything else (a URL, `git@host:path`, an absolute
/// path) as given.
pub fn clone_url(repository: &str, github: &str) -> String {
    let is_slug = !repository.starts_with('/')
        && !repository.contains(':')
        && repository.split('/').count() == 2;
    if is_slug {
        format!("{}/{repository}.git", github.trim_end_matches('/'))
    } else {
        repository.to_string()
    }
}

/// The bare mirrors, one per clone URL, under one directory.
#[derive(Debug, Clone)]
pub struct MirrorCache {
    root: PathBuf,
    /// One lock per mirror: two jobs on one repository must not fetch into it at once.
    locks: Arc<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>>,
}

/// What [`MirrorCache::refresh`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    pub path: PathBuf,
    /// `false` when an existing mirror was only brought up to date.
    pub cloned: bool,
}

impl MirrorCache {
    pub fn new(root: impl Into<PathBuf>) -> MirrorCache {
        MirrorCache {
            root: root.into(),
            locks: Arc::default(),
        }
    }

    /// The mirror's directory: readable for whoever looks at the cache, unique by a hash.
    pub fn path_for(&self, url: &str) -> PathBuf {
        let digest = hex::encode(&Sha256::digest(url.as_bytes())[..8]);
        let name: String = url
            .trim_end_matches(".git")
            .rsplit(['/', ':'])
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .take(40)
            .collect();
        self.root.join(format!("{name}-{digest}.git"))
    }

    /// Brings the mirror of `url` up to date, cloning it the first time; `token`
    /// authenticates an HTTPS remote.
    pub async fn refresh(
        &self,
        url: &str,
        token: Option<&str>,
        budget: &Budget,
    ) -> Result<Mirror, GitError> {
        let path = self.path_for(url);
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.entry(path.clone()).or_default().clone()
        };
        // Another job may hold the mirror with a fetch that hangs: waiting for it obeys
        // this job's cancel and deadline too.
        let waited = format!("fetch (waiting for another job's fetch of {url})");
        let _held = tokio::select! {
            held = lock.lock() => held,
            _ = budget.cancel.cancelled() => return Err(GitError::Cancelled { args: waited }),
            _ = tokio::time::sleep(budget.limits().timeout) => {
                return Err(GitError::TimedOut { args: waited, setting: budget.setting, after: budget.timeout });
            }
        };
        std::fs::create_dir_all(&self.root).map_err(io_error(&self.root))?;
        if path.join("HEAD").is_file() {
            git_with_token(
                &path,
                &["fetch", "--quiet", "--prune", "origin"],
                token.map(|t| (t, url)),
                budget,
            )
            .await?;
            return Ok(Mirror {
                path,
                cloned: false,
            });
        }
        // A clone goes to a temporary name and is renamed into place once whole: one that
        // was stopped (a cancel, a timeout, a killed worker) must not pass for a mirror.
        let partial = path.with_extension(format!("partial-{}", std::process::id()));
        for stale in [&path, &partial] {
            if stale.exists() {
                std::fs::remove_dir_all(stale).map_err(io_error(stale))?;
            }
        }
        let target = partial.to_string_lossy().into_owned();
        let cloned = git_with_token(
            &self.root,
            &["clone", "--quiet", "--mirror", url, &target],
            token.map(|t| (t, url)),
            budget,
        )
        .await;
        if let Err(error) = cloned {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(error);
        }
        std::fs::rename(&partial, &path).map_err(io_error(&path))?;
        Ok(Mirror { path, cloned: true })
    }
}

/// The branches a job's checkout ended up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub default_branch: String,
    pub starting_branch: String,
    pub working_branch: String,
    /// The commit the working branch starts from: what the job's changes are measured against.
    pub base_commit: String,
}

/// Clones `mirror` into `dest` with `origin` pointing at `url` (where a publish pushes),
/// then creates `working_branch` from `starting_branch` (the default branch when `None`).
pub async fn checkout(
    mirror: &Path,
    url: &str,
    dest: &Path,
    starting_branch: Option<&str>,
    working_branch: &str,
    budget: &Budget,
) -> Result<Checkout, GitError> {
    let default_branch = match git(mirror, &["symbolic-ref", "--short", "HEAD"], budget).await {
        Ok(branch) if !branch.is_empty() => branch,
        Ok(_) | Err(GitError::Failed { .. }) => {
            return Err(GitError::NoDefaultBranch {
                repository: url.into(),
            });
        }
        Err(other) => return Err(other),
    };
    let parent = dest.parent().unwrap_or(dest);
    std::fs::create_dir_all(parent).map_err(io_error(parent))?;
    let (mirror_arg, dest_arg) = (mirror.to_string_lossy(), dest.to_string_lossy());
    git(
        parent,
        &["clone", "--quiet", &mirror_arg, &dest_arg],
        budget,
    )
    .await?;
    git(dest, &["remote", "set-url", "origin", url], budget).await?;
    let starting = starting_branch.unwrap_or(&default_branch).to_string();
    let start_ref = format!("refs/remotes/origin/{starting}");
    match git(
        dest,
        &["rev-parse", "--verify", "--quiet", &start_ref],
        budget,
    )
    .await
    {
        Ok(_) => {}
        Err(GitError::Failed { .. }) => {
            return Err(GitError::NoSuchBranch {
                branch: starting,
                repository: url.into(),
            });
        }
        Err(other) => return Err(other),
    }
    git(
        dest,
        &["checkout", "--quiet", "-B", working_branch, &start_ref],
        budget,
    )
    .await?;
    // The working branch is the job's own; it must not track the starting branch, or a
    // plain `git push` would go there.
    match git(dest, &["branch", "--quiet", "--unset-upstream"], budget).await {
        Ok(_) | Err(GitError::Failed { .. }) => {}
        Err(other) => return Err(other),
    }
    let base_commit = git(dest, &["rev-parse", "HEAD"], budget).await?;
    Ok(Checkout {
        default_branch,
        starting_branch: starting,
        working_branch: working_branch.into(),
        base_commit,
    })
}

/// A working branch name for a job that did not choose one: `task/`, the whole job id and a
/// slug of the objective, e.g. `task/0190f3a2-1b2c-7d3e-8f40-5a6b7c8d9e01-add-a-readme`. The
/// whole id, because job ids are UUIDv7: their first digits are a timestamp, the same for
/// every job created within ~65 s, and two jobs with one objective would push to one branch.
pub fn generated_branch(id: &JobId, objective: &str) -> String {
    let mut slug = String::new();
    for word in objective
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if slug.len() + word.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    if slug.is_empty() {
        format!("task/{id}")
    } else {
        format!("task/{id}-{slug}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_slugs_become_urls_and_the_rest_is_kept() {
        let gh = "https://github.com/";
        assert_eq!(
            clone_url("octo/hello", gh),
            "https://github.com/octo/hello.git"
        );
        for kept in [
            "https://gitea.local/o/r.git",
            "git@github.com:o/r.git",
            "/srv/git/r",
            "file:///srv/git/r",
        ] {
            assert_eq!(clone_url(kept, gh), kept);
        }
    }

    #[test]
    fn mirror_paths_are_readable_and_distinct() {
        let cache = MirrorCache::new("/cache");
        let a = cache.path_for("https://github.com/octo/hello.git");
        let b = cache.path_for("https://gitlab.com/octo/hello.git");
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("hello-") && name.ends_with(".git"),
            "{name}"
        );
    }

    fn job(id: &str) -> JobId {
        id.parse().unwrap()
    }

    #[test]
    fn generated_branches_are_short_and_safe() {
        let id = job("01a2b3c4-d5e6-7000-8000-000000000000");
        assert_eq!(
            generated_branch(&id, "Add a README, please!"),
            "task/01a2b3c4-d5e6-7000-8000-000000000000-add-a-readme-please"
        );
        assert_eq!(generated_branch(&id, "¿¡!"), format!("task/{id}"));
        let long = generated_branch(&id, &"word ".repeat(40));
        assert!(long.len() <= format!("task/{id}-").len() + 40, "{long}");
        for name in [
            generated_branch(&id, "a..b"),
            generated_branch(&id, "Fix: the ~bug^ @{now}"),
            generated_branch(&id, "../x/-y.lock"),
        ] {
            let valid = std::process::Command::new("git")
                .args(["check-ref-format", "--branch", &name])
                .output()
                .unwrap();
            assert!(valid.status.success(), "{name}");
        }
    }

    #[test]
    fn jobs_created_within_the_same_minute_get_branches_of_their_own() {
        // UUIDv7 ids a few seconds apart: the same first 8 hex digits (the timestamp's top).
        let first = generated_branch(&job("0190f3a2-1b2c-7d3e-8f40-5a6b7c8d9e01"), "Add a README");
        let second = generated_branch(&job("0190f3a2-40aa-7123-9abc-0123456789ab"), "Add a README");
        assert_ne!(first, second);
    }
}
