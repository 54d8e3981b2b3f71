//! Helpers shared by the worker's integration tests: real git repositories in temp dirs.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs git in `dir` with a test identity and returns its trimmed stdout.
pub fn run(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bare remote whose default branch is `main`, with a `dev` branch one commit ahead.
pub fn remote(root: &Path) -> String {
    let bare = root.join("remote.git");
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    run(
        root,
        &[
            "init",
            "--quiet",
            "--bare",
            "--initial-branch=main",
            bare.to_str().unwrap(),
        ],
    );
    run(&seed, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(seed.join("README.md"), "hello\n").unwrap();
    run(&seed, &["add", "."]);
    run(&seed, &["commit", "--quiet", "-m", "first"]);
    run(&seed, &["checkout", "--quiet", "-b", "dev"]);
    std::fs::write(seed.join("dev.txt"), "dev\n").unwrap();
    run(&seed, &["add", "."]);
    run(&seed, &["commit", "--quiet", "-m", "dev work"]);
    run(
        &seed,
        &["push", "--quiet", bare.to_str().unwrap(), "main", "dev"],
    );
    bare.to_string_lossy().into_owned()
}

/// The recorded gh shim, wrapped so that it records into `dir/gh.log`: (gh, log).
pub fn gh_shim(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("gh.log");
    let gh = dir.join("gh");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gh");
    let script = format!(
        "#!/bin/sh\nGH_SHIM_LOG='{}' exec '{}' \"$@\"\n",
        log.display(),
        fixture.display()
    );
    std::fs::write(&gh, script).unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (gh, log)
}
