use std::ffi::OsStr;
use std::path::Path;

/// The executables whose presence makes a capability: the three agent runtimes, then the
/// tools a task may need (git always, gh to open pull requests). `docker` is not among
/// them: a client without an engine behind it runs nothing, so the worker offers it only
/// once an engine answers ([`crate::container::Engine::find`]).
pub const PROBED_TOOLS: [&str; 5] = ["codex", "claude", "gemini", "git", "gh"];

/// Which of [`PROBED_TOOLS`] are executable files on the given `PATH` value, in that order.
/// The capability is the tool's name, as the contract derives it for a task.
pub fn probe_capabilities(path_var: Option<&OsStr>) -> Vec<String> {
    let dirs: Vec<_> = path_var
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    PROBED_TOOLS
        .iter()
        .filter(|tool| dirs.iter().any(|dir| is_executable(&dir.join(tool))))
        .map(|tool| tool.to_string())
        .collect()
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn touch(dir: &Path, name: &str, mode: u32) {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_executable_tools_on_path_count_in_stable_order() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        touch(a.path(), "gh", 0o755);
        touch(b.path(), "claude", 0o755);
        touch(b.path(), "codex", 0o644); // present but not executable
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        assert_eq!(probe_capabilities(Some(&path)), vec!["claude", "gh"]);
    }

    #[test]
    fn no_path_means_no_capabilities() {
        assert!(probe_capabilities(None).is_empty());
    }
}
