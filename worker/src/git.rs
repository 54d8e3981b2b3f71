//! Git as the worker uses it: one bare mirror per repository, kept warm between jobs, a
//! clone per job made from that mirror (local, so hard links instead of a download), and
//! the job's branches. Always the git CLI, as the user's own machine has it, never a library.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use tokio::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args} failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: String,
        stderr: String,
    },
    #[error("could not run git: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("startingBranch {branch:?} does not exist in {repository}")]
    NoSuchBranch { branch: String, repository: String },
    #[error("{repository} has no default branch (an empty repository?)")]
    NoDefaultBranch { repository: String },
}

/// Runs git in `dir` and returns its trimmed stdout. Prompts are off: a worker has no one
/// to type a password, and a waiting prompt would hang the job until its timeout.
pub async fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    git_with_token(dir, args, None).await
}

/// The environment variable the credential helper of [`CREDENTIAL_HELPER`] reads.
const TOKEN_ENV: &str = "STEPWISE_GIT_TOKEN";

/// `git -c` settings that answer an HTTPS remote's credential request with the token in
/// [`TOKEN_ENV`]. The token travels in the environment, never in argv (which any local user
/// can read in /proc); the empty helper first drops the user's own helpers, so the token
/// is neither stored by them nor mixed with their answers. `x-access-token` is the user
/// name GitHub expects with a token; other hosts ignore it or accept any name.
pub const CREDENTIAL_HELPER: [&str; 4] = [
    "-c",
    "credential.helper=",
    "-c",
    "credential.helper=!f() { test \"$1\" = get && echo username=x-access-token && echo \"password=$STEPWISE_GIT_TOKEN\"; }; f",
];

/// [`git`], authenticating HTTPS remotes with `token` when there is one (a task's resolved
/// `repoAuthRef` or `publishAuthRef`).
pub async fn git_with_token(
    dir: &Path,
    args: &[&str],
    token: Option<&str>,
) -> Result<String, GitError> {
    let mut command = Command::new("git");
    if let Some(token) = token {
        command.args(CREDENTIAL_HELPER).env(TOKEN_ENV, token);
    }
    let output = command
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .await?;
    if !output.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
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
    pub async fn refresh(&self, url: &str, token: Option<&str>) -> Result<Mirror, GitError> {
        let path = self.path_for(url);
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.entry(path.clone()).or_default().clone()
        };
        let _held = lock.lock().await;
        std::fs::create_dir_all(&self.root)?;
        if path.join("HEAD").is_file() {
            git_with_token(&path, &["fetch", "--quiet", "--prune", "origin"], token).await?;
            return Ok(Mirror {
                path,
                cloned: false,
            });
        }
        // A half-made mirror from an interrupted clone would fail every later fetch.
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        let target = path.to_string_lossy().into_owned();
        git_with_token(
            &self.root,
            &["clone", "--quiet", "--mirror", url, &target],
            token,
        )
        .await?;
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
) -> Result<Checkout, GitError> {
    let default_branch = git(mirror, &["symbolic-ref", "--short", "HEAD"])
        .await
        .ok()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| GitError::NoDefaultBranch {
            repository: url.into(),
        })?;
    let parent = dest.parent().unwrap_or(dest);
    std::fs::create_dir_all(parent)?;
    let (mirror_arg, dest_arg) = (mirror.to_string_lossy(), dest.to_string_lossy());
    git(parent, &["clone", "--quiet", &mirror_arg, &dest_arg]).await?;
    git(dest, &["remote", "set-url", "origin", url]).await?;
    let starting = starting_branch.unwrap_or(&default_branch).to_string();
    let start_ref = format!("refs/remotes/origin/{starting}");
    if git(dest, &["rev-parse", "--verify", "--quiet", &start_ref])
        .await
        .is_err()
    {
        return Err(GitError::NoSuchBranch {
            branch: starting,
            repository: url.into(),
        });
    }
    git(
        dest,
        &["checkout", "--quiet", "-B", working_branch, &start_ref],
    )
    .await?;
    // The working branch is the job's own; it must not track the starting branch, or a
    // plain `git push` would go there.
    git(dest, &["branch", "--quiet", "--unset-upstream"])
        .await
        .ok();
    let base_commit = git(dest, &["rev-parse", "HEAD"]).await?;
    Ok(Checkout {
        default_branch,
        starting_branch: starting,
        working_branch: working_branch.into(),
        base_commit,
    })
}

/// A working branch name for a job that did not choose one: `task/` plus the start of the
/// job id and a slug of the objective, e.g. `task/01a2b3c4-add-a-readme`.
pub fn generated_branch(job_id: &str, objective: &str) -> String {
    let id: String = job_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect();
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

    #[test]
    fn the_credential_helper_answers_with_the_token_from_the_environment() {
        use std::io::Write;
        let mut child = std::process::Command::new("git")
            .args(CREDENTIAL_HELPER)
            .args(["credential", "fill"])
            .env(TOKEN_ENV, "tok-from-env-42")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"protocol=https\nhost=git.example.com\n\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{answer}");
        assert!(answer.contains("username=x-access-token\n"), "{answer}");
        assert!(answer.contains("password=tok-from-env-42\n"), "{answer}");
        assert!(
            !CREDENTIAL_HELPER.concat().contains("tok-from-env"),
            "the token must travel in the environment, not argv"
        );
    }

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

    #[test]
    fn generated_branches_are_short_and_safe() {
        assert_eq!(
            generated_branch(
                "01a2b3c4-d5e6-7000-8000-000000000000",
                "Add a README, please!"
            ),
            "task/01a2b3c4-add-a-readme-please"
        );
        assert_eq!(generated_branch("01a2b3c4", "¿¡!"), "task/01a2b3c4");
        let long = generated_branch("01a2b3c4", &"word ".repeat(40));
        assert!(long.len() <= "task/01a2b3c4-".len() + 40, "{long}");
    }
}
