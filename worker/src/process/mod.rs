//! The one subprocess policy: everything the worker starts (agent CLIs, git, gh) runs as
//! a process group of its own with a timeout, stdin from /dev/null (or the prompt, written
//! whole and then closed) and its output captured;
//! a cancel or the timeout stops the whole group (SIGTERM, then SIGKILL once the grace
//! period is over), and the group dies with the worker however the worker dies.
//!
//! The group is the unit because agents start shells, test runners and servers, and git
//! starts its transport helpers: stopping only the first process would leave the rest
//! running in the workspace after the job ended.
//!
//! - [`run`]: an agent invocation, its output handed over line by line as it comes.
//! - [`output`]: git or gh, their output collected, within a stage's [`Budget`].
//! - `group`: spawn, stop and wait for a group; `supervisor`: the guard that kills the
//!   group when the worker dies; `reaper`: the worker adopts and reaps its groups' orphans.
//!
//! Output is handed over raw; the caller redacts it before it is cut, stored or sent.

mod group;
mod reaper;
mod supervisor;

use std::io;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::runtime::Invocation;

pub use reaper::adopt_orphans;

/// How long a run may take, and how long a stopped group gets between SIGTERM and SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub timeout: Duration,
    pub grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(60 * 60),
            grace: Duration::from_secs(5),
        }
    }
}

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipe {
    Stdout,
    Stderr,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The CLI exited by itself.
    Exited(ExitStatus),
    /// The run was stopped: `cancelled` by request, otherwise for its timeout. `stop` is
    /// how long the group took to be gone once SIGTERM was sent; `killed` says whether
    /// SIGKILL was needed.
    Stopped {
        cancelled: bool,
        stop: Duration,
        killed: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("could not write {path}: {source}")]
    WriteFile { path: String, source: io::Error },
    #[error("could not start {program}: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("waiting for {program} failed: {source}")]
    Wait { program: String, source: io::Error },
    #[error("{program} was stopped: the job was cancelled")]
    Cancelled { program: String },
    #[error("{program} did not finish within {} s and was stopped", after.as_secs())]
    TimedOut { program: String, after: Duration },
}

/// The time a series of commands may take together (a stage's git and gh): one deadline
/// for all of them, the grace between SIGTERM and SIGKILL, and the cancel that stops them.
#[derive(Debug, Clone)]
pub struct Budget {
    /// The setting this budget comes from, which a timeout's error names so that it can be
    /// raised (say `--prepare-timeout-seconds`).
    pub setting: &'static str,
    pub timeout: Duration,
    pub grace: Duration,
    pub cancel: CancellationToken,
    deadline: Instant,
}

impl Budget {
    /// A budget of `timeout` from now.
    pub fn new(
        setting: &'static str,
        timeout: Duration,
        grace: Duration,
        cancel: CancellationToken,
    ) -> Budget {
        Budget {
            setting,
            timeout,
            grace,
            cancel,
            deadline: Instant::now() + timeout,
        }
    }

    /// What is left of it, for the next command.
    pub fn limits(&self) -> Limits {
        Limits {
            timeout: self.deadline.saturating_duration_since(Instant::now()),
            grace: self.grace,
        }
    }
}

/// Runs `invocation` until it exits, `cancel` fires or `limits.timeout` passes; every
/// output line goes to `on_line` as it arrives (an unfinished last line included).
pub async fn run(
    invocation: &Invocation,
    limits: Limits,
    cancel: &CancellationToken,
    mut on_line: impl FnMut(Pipe, &str),
) -> Result<Ended, RunError> {
    for (path, body) in &invocation.files {
        write_unlinked(path, body).map_err(|source| RunError::WriteFile {
            path: path.display().to_string(),
            source,
        })?;
    }
    let mut command = Command::new(&invocation.program);
    if invocation.clear_env {
        command.env_clear();
    }
    for name in &invocation.env_remove {
        command.env_remove(name);
    }
    command
        .args(&invocation.args)
        .current_dir(&invocation.cwd)
        .envs(invocation.env.iter().map(|(k, v)| (k, v)));
    // The prompt goes on stdin: as an argument, 128 KiB or more fails with E2BIG.
    let running =
        group::spawn(&mut command, invocation.stdin.clone())?.sparing_leader(invocation.supervised);
    let mut lines = Lines::default();
    let ended = running
        .drive(limits, cancel, &mut |pipe, bytes| {
            lines.push(pipe, bytes, &mut on_line)
        })
        .await;
    lines.finish(&mut on_line);
    ended
}

/// Writes `body` to `path` (inside a job's HOME, which an earlier step may have filled
/// with links), through no symbolic link: the worker writes outside the sandbox, so a link
/// planted at the file or at a folder on its way must not send the write elsewhere on the
/// host. The body goes to a new file beside it, which then replaces whatever is at `path`
/// (a link, or a FIFO that would block an open for writing for ever); a link on the way
/// refuses the write.
fn write_unlinked(path: &Path, body: &str) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(dir) = path.parent() else {
        return Err(io::Error::other("no folder to write in"));
    };
    std::fs::create_dir_all(dir)?;
    if dir.canonicalize()? != std::path::absolute(dir)? {
        return Err(io::Error::other(
            "a folder on its way is a symbolic link; not written",
        ));
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let fresh = dir.join(format!(".{name}.stepwise-{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&fresh)?;
    file.write_all(body.as_bytes())?;
    std::fs::rename(&fresh, path)
}

/// What a command that ran to its end printed, and how it exited.
#[derive(Debug, Clone)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    /// stderr as text, trimmed, for an error message (to be redacted by whoever shows it).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// Runs `command` (git, gh) under the policy within what is left of `budget`, and
/// collects its output. A command stopped by the budget's cancel or deadline is an error
/// ([`RunError::Cancelled`], [`RunError::TimedOut`]); one whose budget is already spent is
/// not started.
pub async fn output(command: &mut Command, budget: &Budget) -> Result<Output, RunError> {
    let name = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let program = || name.clone();
    if budget.cancel.is_cancelled() {
        return Err(RunError::Cancelled { program: program() });
    }
    let limits = budget.limits();
    if limits.timeout.is_zero() {
        return Err(RunError::TimedOut {
            program: program(),
            after: budget.timeout,
        });
    }
    let running = group::spawn(command, None)?;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let ended = running
        .drive(limits, &budget.cancel, &mut |pipe, bytes| match pipe {
            Pipe::Stdout => stdout.extend_from_slice(bytes),
            Pipe::Stderr => stderr.extend_from_slice(bytes),
        })
        .await?;
    match ended {
        Ended::Exited(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        Ended::Stopped {
            cancelled: true, ..
        } => Err(RunError::Cancelled { program: program() }),
        Ended::Stopped { .. } => Err(RunError::TimedOut {
            program: program(),
            after: budget.timeout,
        }),
    }
}

/// How long a line may grow before it is handed over in pieces: a program that prints
/// without newlines (`yes | tr -d '\n'`) must not fill the worker's memory.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Cuts each pipe's output into lines (without their `\n` or `\r\n`), as text with
/// invalid UTF-8 replaced; a line longer than [`MAX_LINE_BYTES`] comes in pieces.
#[derive(Default)]
struct Lines {
    pending: [Vec<u8>; 2],
}

impl Lines {
    fn push(&mut self, pipe: Pipe, bytes: &[u8], on_line: &mut impl FnMut(Pipe, &str)) {
        let buf = &mut self.pending[pipe as usize];
        buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = buf[start..].iter().position(|&b| b == b'\n') {
            emit(pipe, &buf[start..start + end], on_line);
            start += end + 1;
        }
        while buf.len() - start >= MAX_LINE_BYTES {
            emit(pipe, &buf[start..start + MAX_LINE_BYTES], on_line);
            start += MAX_LINE_BYTES;
        }
        buf.drain(..start);
    }

    fn finish(&mut self, on_line: &mut impl FnMut(Pipe, &str)) {
        for pipe in [Pipe::Stdout, Pipe::Stderr] {
            let rest = std::mem::take(&mut self.pending[pipe as usize]);
            if !rest.is_empty() {
                emit(pipe, &rest, on_line);
            }
        }
    }
}

fn emit(pipe: Pipe, line: &[u8], on_line: &mut impl FnMut(Pipe, &str)) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    on_line(pipe, &String::from_utf8_lossy(line));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_through_no_link_and_past_a_fifo_a_step_left() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().canonicalize().unwrap().join("home");
        let elsewhere = tmp.path().canonicalize().unwrap().join("elsewhere");
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        // A link at the file: replaced, its target untouched.
        let settings = home.join(".gemini/settings.json");
        std::os::unix::fs::symlink(elsewhere.join("victim"), &settings).unwrap();
        write_unlinked(&settings, "{}").unwrap();
        assert!(!elsewhere.join("victim").exists());
        assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}");
        // A FIFO at the file: replaced, not waited on.
        std::fs::remove_file(&settings).unwrap();
        let fifo = std::ffi::CString::new(settings.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        write_unlinked(&settings, "{\"a\":1}").unwrap();
        assert!(std::fs::symlink_metadata(&settings).unwrap().is_file());
        // A link on the way: refused.
        std::os::unix::fs::symlink(&elsewhere, home.join(".codex")).unwrap();
        assert!(write_unlinked(&home.join(".codex/config.toml"), "x").is_err());
        assert!(!elsewhere.join("config.toml").exists());
    }
}
