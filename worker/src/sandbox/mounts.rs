//! What of the host a box shows, decided once when the worker starts: the system
//! read-only (`/usr`, the `/bin` and `/lib` folders or their links, `/etc` less the files
//! known to hold secrets), the folders the agent CLIs and node are installed in, the
//! folders the operator adds, and nothing else. The root of the box is empty, so the data
//! dir, other jobs' workspaces and the worker's HOME are simply not there; where one lies
//! inside a folder that is shown, it is masked.

use std::path::{Path, PathBuf};

/// One thing the box shows of the host, in the order the box is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// `path`, read-only, at the same place.
    ReadOnly(PathBuf),
    /// A symbolic link at `path` to `target`, as the host has it (`/bin` -> `usr/bin`).
    Link { path: PathBuf, target: PathBuf },
    /// `path` emptied: a file reads as empty, a folder as an empty read-only folder.
    Mask { path: PathBuf, dir: bool },
}

/// The folders of the system a program needs to run; each is shown as the host has it,
/// a folder read-only or a link as a link.
const SYSTEM: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Files and folders under `/etc` that hold secrets (password hashes, host keys, TLS
/// keys, the credentials and environment files of services): masked.
const ETC_SECRETS: [&str; 33] = [
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "security/opasswd",
    "ssl/private",
    "pki/tls/private",
    "pki/CA/private",
    "krb5.keytab",
    "ipsec.secrets",
    "ppp",
    "wireguard",
    "openvpn",
    "NetworkManager/system-connections",
    "wpa_supplicant",
    "netplan",
    "letsencrypt",
    "credstore",
    "credstore.encrypted",
    // Unit files and their drop-ins carry `Environment=` lines; /etc/default holds the
    // environment files of services.
    "systemd/system",
    "default",
    "environment",
    "stepwise",
    "postgresql",
    "mysql",
    "docker",
    "containers/auth.json",
    "kubernetes",
    "rancher",
    "gitlab-runner",
    "cloud/cloud.cfg.d",
];

/// What the box shows of the host besides the job's own folders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostView {
    pub mounts: Vec<Mount>,
}

impl HostView {
    /// The view for `programs` (the agent CLIs, as configured: a path or a name on
    /// `path_var`), the operator's `read_only` folders, and `hidden`, which must never
    /// show (the data dir, the workdir, the worker's HOME, the operator's `--sandbox-hide`).
    pub fn new(
        programs: &[PathBuf],
        path_var: Option<&std::ffi::OsStr>,
        read_only: &[PathBuf],
        hidden: &[PathBuf],
    ) -> HostView {
        let hidden: Vec<PathBuf> = hidden.iter().map(|p| canonical(p)).collect();
        let mut view = HostView::default();
        for root in SYSTEM {
            let path = Path::new(root);
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(path) {
                        view.mounts.push(Mount::Link {
                            path: path.into(),
                            target,
                        });
                    }
                }
                Ok(meta) if meta.is_dir() => view.mounts.push(Mount::ReadOnly(path.into())),
                _ => {}
            }
        }
        view.mask_etc_secrets();
        // /etc/resolv.conf is often a link into /run, which is not shown.
        if let Ok(resolved) = Path::new("/etc/resolv.conf").canonicalize() {
            view.show(resolved, Some(&hidden));
        }
        let dirs: Vec<PathBuf> = path_var
            .map(|p| std::env::split_paths(p).collect())
            .unwrap_or_default();
        let node = PathBuf::from("node");
        for program in programs.iter().chain([&node]) {
            for folder in install_folders(program, &dirs) {
                view.show(folder, Some(&hidden));
            }
        }
        // The operator's folders are shown as asked; what is hidden inside them is masked.
        for folder in read_only {
            view.show(canonical(folder), None);
        }
        // A path that is not there has nothing to hide (and a mask would need its mount
        // point made in a read-only folder); the worker makes its own folders first.
        for path in hidden.iter().filter(|p| p.exists()) {
            if view.shows(path) {
                view.mounts.push(Mount::Mask {
                    path: path.clone(),
                    dir: path.is_dir(),
                });
            }
        }
        view
    }

    fn mask_etc_secrets(&mut self) {
        let etc = Path::new("/etc");
        let mut secrets: Vec<PathBuf> = ETC_SECRETS.iter().map(|s| etc.join(s)).collect();
        // The host's SSH private keys; the client's configuration stays readable.
        if let Ok(entries) = std::fs::read_dir(etc.join("ssh")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("ssh_host_") && !name.ends_with(".pub") {
                    secrets.push(entry.path());
                }
            }
        }
        for path in secrets {
            // Not followed: a link is masked where it is, whatever it points to.
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                self.mounts.push(Mount::Mask {
                    dir: meta.is_dir(),
                    path,
                });
            }
        }
    }

    /// Whether `path` is inside a folder the box shows read-only.
    pub fn shows(&self, path: &Path) -> bool {
        self.mounts.iter().any(|m| match m {
            Mount::ReadOnly(shown) => path.starts_with(shown),
            Mount::Link { path: link, target } => {
                let resolved = link.parent().unwrap_or(link).join(target);
                path.starts_with(link) || path.starts_with(resolved)
            }
            Mount::Mask { .. } => false,
        })
    }

    /// Shows `path` read-only, unless it is shown already or does not exist. A folder
    /// found on the way (a CLI's) that holds a path of `hidden` is not shown at all.
    fn show(&mut self, path: PathBuf, hidden: Option<&[PathBuf]>) {
        if !path.exists() || self.shows(&path) {
            return;
        }
        if hidden.is_some_and(|hidden| hidden.iter().any(|h| h.starts_with(&path))) {
            return;
        }
        // A folder inside it that is shown already is covered by it now.
        self.mounts
            .retain(|m| !matches!(m, Mount::ReadOnly(p) if p.starts_with(&path)));
        self.mounts.push(Mount::ReadOnly(path));
    }
}

/// The path itself when it cannot be resolved (it may not exist yet).
fn canonical(path: &Path) -> PathBuf {
    path.canonicalize()
        .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// Where `program` is installed: the folder it is found in (as configured, or on `PATH`),
/// and, once its links are resolved, the outermost `node_modules` holding it (an npm
/// package needs its dependencies beside it), else the folder of the file itself.
fn install_folders(program: &Path, path_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let found = if program.components().count() > 1 {
        Some(program.to_path_buf())
    } else {
        path_dirs
            .iter()
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    };
    let Some(found) = found else {
        return Vec::new();
    };
    let mut folders = Vec::new();
    // Resolved before it is compared with what is hidden: a folder on PATH may be a link
    // into the worker's HOME.
    if let Some(dir) = std::path::absolute(&found)
        .ok()
        .and_then(|f| f.parent().map(Path::to_path_buf))
        .and_then(|dir| dir.canonicalize().ok())
    {
        folders.push(dir);
    }
    if let Ok(resolved) = found.canonicalize() {
        let outermost = resolved
            .ancestors()
            .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .last()
            .map(Path::to_path_buf);
        match outermost {
            Some(modules) => folders.push(modules),
            None => folders.extend(resolved.parent().map(Path::to_path_buf)),
        }
    }
    folders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npm_cli_shows_its_outermost_node_modules_and_the_folder_it_was_found_in() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let package = root.join("agents/node_modules/@openai/codex/bin");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::create_dir_all(root.join("agents/node_modules/.bin")).unwrap();
        std::fs::write(package.join("codex.js"), "#!/usr/bin/env node\n").unwrap();
        std::os::unix::fs::symlink(
            "../@openai/codex/bin/codex.js",
            root.join("agents/node_modules/.bin/codex"),
        )
        .unwrap();
        let path = std::env::join_paths([root.join("agents/node_modules/.bin")]).unwrap();
        let view = HostView::new(&["codex".into()], Some(&path), &[], &[]);
        assert!(
            view.mounts
                .contains(&Mount::ReadOnly(root.join("agents/node_modules"))),
            "{view:?}"
        );
        // The .bin folder is inside it, so it is not shown twice.
        assert!(
            !view
                .mounts
                .contains(&Mount::ReadOnly(root.join("agents/node_modules/.bin")))
        );
    }

    #[test]
    fn a_folder_that_holds_a_hidden_path_is_not_shown_and_a_hidden_path_inside_a_shown_one_is_masked()
     {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let tools = root.join("tools");
        std::fs::create_dir_all(tools.join("data")).unwrap();
        std::fs::write(tools.join("agent"), "#!/bin/sh\n").unwrap();
        // The operator shows `tools`, which holds the data dir: shown, the data masked.
        let view = HostView::new(
            &[],
            None,
            std::slice::from_ref(&tools),
            &[tools.join("data")],
        );
        assert!(view.mounts.contains(&Mount::ReadOnly(tools.clone())));
        assert!(view.mounts.contains(&Mount::Mask {
            path: tools.join("data"),
            dir: true
        }));
        // A CLI found in a folder that holds the data dir: that folder is not shown.
        let view = HostView::new(&[tools.join("agent")], None, &[], &[tools.join("data")]);
        assert!(!view.shows(&tools), "{view:?}");
        // One inside the worker's HOME: that folder only, not the HOME.
        let view = HostView::new(
            &[tools.join("agent")],
            None,
            &[],
            std::slice::from_ref(&root),
        );
        assert!(view.shows(&tools) && !view.shows(&root), "{view:?}");
    }

    #[test]
    fn the_system_is_shown_and_etc_secrets_are_masked() {
        let view = HostView::new(&[], None, &[], &[]);
        assert!(view.mounts.contains(&Mount::ReadOnly("/usr".into())));
        assert!(view.shows(Path::new("/etc/passwd")));
        if Path::new("/etc/shadow").exists() {
            assert!(view.mounts.contains(&Mount::Mask {
                path: "/etc/shadow".into(),
                dir: false
            }));
        }
        assert!(!view.shows(Path::new("/root")));
        assert!(!view.shows(Path::new("/var/lib/postgresql")));
    }
}
