//! The logins of the worker's own user, made available to each job (the worker's
//! `--share-logins` option): many people run codex and claude on a subscription login
//! rather than an API key, and a job's HOME of its own would otherwise hide it.
//!
//! Only the credential files are copied into the job's HOME, never the user's settings,
//! history or sessions; the copies are readable by this user only, outside the checkout
//! (so no patch or pull request can hold them), never uploaded, and removed when the job
//! ends, even when its workspace is kept. A CLI may refresh an expired token in its copy;
//! the user's own files are never written.

use std::io;
use std::path::{Path, PathBuf};

use contract::RuntimeMode;

/// Where each CLI keeps its login, relative to HOME.
pub fn login_files(mode: RuntimeMode) -> &'static [&'static str] {
    match mode {
        // `codex login`, with ChatGPT or with an API key.
        RuntimeMode::Codex => &[".codex/auth.json"],
        // claude's `/login`; its account record lives in .claude.json.
        RuntimeMode::Claude => &[".claude/.credentials.json", ".claude.json"],
        // gemini's "Login with Google".
        RuntimeMode::Gemini => &[".gemini/oauth_creds.json", ".gemini/google_accounts.json"],
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logins {
    /// The worker's user's HOME, where the logins are read from.
    pub home: PathBuf,
}

impl Logins {
    /// Copies `mode`'s login files that exist into `job_home`; returns the copies.
    pub fn install(&self, mode: RuntimeMode, job_home: &Path) -> io::Result<Vec<PathBuf>> {
        let mut copied = Vec::new();
        for file in login_files(mode) {
            let from = self.home.join(file);
            if !from.is_file() {
                continue;
            }
            let to = job_home.join(file);
            if let Some(dir) = to.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let _ = std::fs::remove_file(&to);
            std::fs::copy(&from, &to)?;
            std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
            copied.push(to);
        }
        Ok(copied)
    }

    /// How gemini is logged in (`security.auth.selectedType` of the user's settings), so
    /// the job's own settings select the same.
    pub fn gemini_auth_type(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.home.join(".gemini/settings.json")).ok()?;
        let settings: serde_json::Value = serde_json::from_str(&text).ok()?;
        settings
            .pointer("/security/auth/selectedType")
            .and_then(|v| v.as_str())
            .map(str::to_string)
    }
}

/// Removes the copies `install` made into `job_home`; a copy already gone is fine. A step
/// may have replaced a folder on a copy's way with a link (to the worker user's own
/// `~/.codex`, say): a copy is removed only through real folders of the job's HOME, and
/// when one is not, the job's whole HOME goes (never following a link), since the copy
/// may be anywhere in it now.
pub fn remove(job_home: &Path, copies: &[PathBuf]) {
    let home = job_home.canonicalize().ok();
    for copy in copies {
        let through_real_folders = copy.parent().is_some_and(|dir| {
            dir.canonicalize().ok().as_deref() == Some(dir)
                && home.as_deref().is_some_and(|home| dir.starts_with(home))
        });
        if through_real_folders {
            let _ = std::fs::remove_file(copy);
        } else {
            tracing::warn!(
                home = %job_home.display(),
                "a link in the job's HOME leads a login copy elsewhere: the HOME is removed whole"
            );
            let _ = std::fs::remove_dir_all(job_home);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn present_login_files_are_copied_private_and_removed_after() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        std::fs::create_dir_all(user.join(".claude")).unwrap();
        std::fs::write(user.join(".claude/.credentials.json"), "{\"token\":1}").unwrap();
        std::fs::create_dir_all(user.join(".claude/projects")).unwrap();
        std::fs::write(user.join(".claude/settings.json"), "{}").unwrap();
        let job = tmp.path().join("job-home");
        let logins = Logins { home: user.clone() };
        let copies = logins.install(RuntimeMode::Claude, &job).unwrap();
        assert_eq!(copies, [job.join(".claude/.credentials.json")]);
        assert_eq!(
            std::fs::read_to_string(&copies[0]).unwrap(),
            "{\"token\":1}"
        );
        let mode = std::fs::metadata(&copies[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Credentials only: not the user's settings, sessions or history.
        assert!(!job.join(".claude/settings.json").exists());
        assert!(!job.join(".claude/projects").exists());
        assert!(logins.install(RuntimeMode::Codex, &job).unwrap().is_empty());
        remove(&job, &copies);
        assert!(!copies[0].exists());
        assert!(
            user.join(".claude/.credentials.json").is_file(),
            "the user's own stays"
        );
    }

    #[test]
    fn a_link_a_step_planted_on_a_copy_s_way_never_removes_the_user_s_own_login() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        std::fs::create_dir_all(user.join(".codex")).unwrap();
        std::fs::write(user.join(".codex/auth.json"), "{}").unwrap();
        let job = tmp.path().join("job-home");
        let logins = Logins { home: user.clone() };
        let copies = logins.install(RuntimeMode::Codex, &job).unwrap();
        // The step moves its .codex aside and links the user's in its place.
        std::fs::rename(job.join(".codex"), job.join(".codex-moved")).unwrap();
        std::os::unix::fs::symlink(user.join(".codex"), job.join(".codex")).unwrap();
        remove(&job, &copies);
        assert!(
            user.join(".codex/auth.json").is_file(),
            "the user's own was removed"
        );
        assert!(!job.exists(), "the HOME holding the moved copy stays");
    }

    #[test]
    fn gemini_s_login_kind_comes_from_the_user_s_settings() {
        let tmp = tempfile::tempdir().unwrap();
        let logins = Logins {
            home: tmp.path().to_path_buf(),
        };
        assert_eq!(logins.gemini_auth_type(), None);
        std::fs::create_dir_all(tmp.path().join(".gemini")).unwrap();
        std::fs::write(
            tmp.path().join(".gemini/settings.json"),
            r#"{"security":{"auth":{"selectedType":"oauth-personal"}}}"#,
        )
        .unwrap();
        assert_eq!(logins.gemini_auth_type().as_deref(), Some("oauth-personal"));
    }
}
