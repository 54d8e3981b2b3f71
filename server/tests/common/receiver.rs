//! The webhook receiver the webhook tests post to, written apart from stepwise
//! (`fixtures/webhook_receiver.py`, which checks each signature with Python's own hmac).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The receiver, killed when dropped.
pub struct Receiver {
    child: Child,
    pub url: String,
    log: PathBuf,
}

impl Receiver {
    /// A receiver that checks signatures with `secret` and answers `statuses` in turn.
    pub fn start(dir: &Path, secret: &str, statuses: &[u16]) -> Receiver {
        let log = dir.join(format!("received-{secret}.jsonl"));
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/webhook_receiver.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(secret)
            .arg(&log)
            .args(statuses.iter().map(u16::to_string))
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the receiver");
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        Receiver {
            child,
            url: format!("http://127.0.0.1:{}", port.trim()),
            log,
        }
    }

    /// Every post so far.
    pub fn posts(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
