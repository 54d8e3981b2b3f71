//! What the process-level tests share: the `stepwise` binary run for real (`serve`, `token
//! create`), killed when a test ends however it ends, and waiting for things to happen.

#![allow(dead_code)] // each test binary uses its own part of this

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod receiver;

pub const BIN: &str = env!("CARGO_BIN_EXE_stepwise");

/// Kills the process when the test ends, however it ends.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A started `stepwise serve`: its URL, and the first admin token if it made it.
pub struct Served {
    pub process: Process,
    pub url: String,
    pub admin: Option<String>,
}

/// Starts `command` (a `stepwise serve …`, its stdout piped) and reads what it prints up
/// to its URL; the rest of its output is read and dropped, so it never writes into a
/// closed pipe.
pub fn serve(mut command: Command) -> Served {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("stepwise serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut admin, mut url) = (None, None);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.starts_with("created the first admin token") {
            admin = line.split(": ").nth(1).map(|t| t.trim().to_string());
        }
        if let Some(u) = line.strip_prefix("stepwise is running on ") {
            url = Some(u.trim().to_string());
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    Served {
        process: Process(child),
        url: url.expect("serve printed its URL"),
        admin,
    }
}

/// `stepwise token create --kind worker --name NAME` with `db_args` (`--data-dir D` or
/// `--database-url U`): the worker token's secret.
pub fn worker_token(db_args: &[&std::ffi::OsStr], name: &str) -> String {
    let out = Command::new(BIN)
        .args(["token", "create", "--kind", "worker", "--name", name])
        .args(db_args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("(shown only now): ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token in {text}"))
        .to_string()
}

pub async fn wait_for<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_up_to(Duration::from_secs(60), what, check).await
}

pub async fn wait_up_to<T>(
    limit: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The number in a file (a pid the scripted agent wrote), once it is there.
pub fn pid_in(file: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// The body of artifact `name` among a job's `(name, body)` artifacts.
pub fn artifact<'a>(artifacts: &'a [(String, String)], name: &str) -> &'a str {
    artifacts
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, body)| body.as_str())
        .unwrap_or_else(|| {
            panic!(
                "no artifact {name}: {:?}",
                artifacts.iter().map(|(n, _)| n).collect::<Vec<_>>()
            )
        })
}
