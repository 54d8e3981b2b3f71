//! What keeps the worker's own git, which runs outside the sandbox in a checkout a step
//! has written, from running anything of the step's: settings that turn hooks and the
//! file-system monitor off, and the refusal of a repository a step nested in the checkout.

use std::path::Path;

use super::GitError;

/// Settings every git of the worker's runs with, outside the sandbox, in a checkout a step
/// has written: no hook and no file-system monitor, whatever a configuration says. (The
/// checkout's own `.git` is read-only to steps; a repository nested in the checkout is
/// refused before any git runs there, see [`nested_repositories`].)
pub const HOST_GIT_ENV: [(&str, &str); 5] = [
    ("GIT_CONFIG_COUNT", "2"),
    ("GIT_CONFIG_KEY_0", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_0", "/dev/null"),
    ("GIT_CONFIG_KEY_1", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_1", "false"),
];

/// The git repositories a step left inside the checkout `repo` (its own `.git` aside), as
/// paths relative to it: a `.git` folder, file or link anywhere below. The worker's git,
/// which runs outside the sandbox, would run such a repository's hooks and settings when it
/// looks at it (as a submodule), so a checkout holding one is not looked at. At most
/// `limit` are listed.
pub fn nested_repositories(repo: &Path, limit: usize) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![repo.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name() == ".git" {
                if folder != repo {
                    let shown = path.strip_prefix(repo).unwrap_or(&path);
                    found.push(shown.display().to_string());
                    if found.len() >= limit {
                        return found;
                    }
                }
                continue;
            }
            // Not followed: a link is not a folder of the checkout.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                folders.push(path);
            }
        }
    }
    found.sort();
    found
}

/// [`nested_repositories`] as the error that stops the job.
pub fn refuse_nested_repositories(repo: &Path) -> Result<(), GitError> {
    let found = nested_repositories(repo, 5);
    if found.is_empty() {
        return Ok(());
    }
    Err(GitError::NestedRepository { found })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_folder_file_or_link_below_the_checkout_is_a_nested_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path();
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        assert!(
            nested_repositories(repo, 5).is_empty(),
            "the checkout's own .git"
        );
        std::fs::create_dir_all(repo.join("vendor/lib/.git")).unwrap();
        std::fs::write(repo.join("src/deep/.git"), "gitdir: /elsewhere\n").unwrap();
        std::os::unix::fs::symlink("/tmp", repo.join("src/.git")).unwrap();
        // A link to a folder is not followed into.
        std::os::unix::fs::symlink(repo.join("vendor"), repo.join("again")).unwrap();
        assert_eq!(
            nested_repositories(repo, 5),
            ["src/.git", "src/deep/.git", "vendor/lib/.git"]
        );
        assert_eq!(nested_repositories(repo, 1).len(), 1);
        let refused = refuse_nested_repositories(repo).unwrap_err().to_string();
        assert!(
            refused.contains("src/.git, src/deep/.git, vendor/lib/.git"),
            "{refused}"
        );
    }
}
