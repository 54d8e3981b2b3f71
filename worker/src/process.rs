//! Runs one agent CLI invocation as a process group of its own, hands over its output line
//! by line as it comes, and stops the whole group (the CLI and everything it started) on
//! cancel or timeout: SIGTERM, then SIGKILL once the grace period is over.
//!
//! The group is the unit because agents start shells, test runners and servers: stopping
//! only the CLI would leave its grandchildren running in the workspace after the job ended.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::Invocation;

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
        let written = match path.parent() {
            Some(dir) => std::fs::create_dir_all(dir).and_then(|()| std::fs::write(path, body)),
            None => std::fs::write(path, body),
        };
        written.map_err(|source| RunError::WriteFile {
            path: path.display().to_string(),
            source,
        })?;
    }
    let program = invocation.program.display().to_string();
    let mut command = Command::new(&invocation.program);
    command
        .args(&invocation.args)
        .current_dir(&invocation.cwd)
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // A worker killed outright (SIGKILL, OOM) runs no cleanup, and the agent, in a group of
    // its own, would go on editing a workspace whose job is about to be retried elsewhere.
    // The kernel kills it with the worker instead. (It fires when the forking thread ends:
    // tokio's worker threads live as long as the runtime.)
    #[cfg(target_os = "linux")]
    // SAFETY: the closure runs in the forked child before exec and makes only the
    // async-signal-safe prctl and getppid system calls.
    unsafe {
        let parent = libc::getpid();
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The worker may have died between fork and prctl.
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "the worker exited while starting the agent",
                ));
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|source| RunError::Spawn {
        program: program.clone(),
        source,
    })?;
    let Some(group) = child.id().map(|pid| pid as libc::pid_t) else {
        unreachable!("a child that was just spawned and not yet waited for has a pid")
    };
    let (lines, mut incoming) = mpsc::unbounded_channel();
    if let Some(out) = child.stdout.take() {
        forward(out, Pipe::Stdout, lines.clone());
    }
    if let Some(err) = child.stderr.take() {
        forward(err, Pipe::Stderr, lines);
    }
    let wait_error = |source| RunError::Wait {
        program: program.clone(),
        source,
    };

    let deadline = Instant::now() + limits.timeout;
    let cancelled = loop {
        tokio::select! {
            Some((pipe, line)) = incoming.recv() => on_line(pipe, &line),
            exited = child.wait() => {
                let status = exited.map_err(wait_error)?;
                // The CLI is done; whatever it left running in its group goes too, and
                // then its pipes close.
                signal(group, libc::SIGKILL);
                drain(&mut incoming, &mut on_line).await;
                return Ok(Ended::Exited(status));
            },
            _ = cancel.cancelled() => break true,
            _ = tokio::time::sleep_until(deadline) => break false,
        }
    };

    let since = Instant::now();
    signal(group, libc::SIGTERM);
    let mut killed = false;
    let mut reaped = false;
    let mut tick = tokio::time::interval(GROUP_POLL);
    loop {
        tokio::select! {
            Some((pipe, line)) = incoming.recv() => on_line(pipe, &line),
            exited = child.wait(), if !reaped => {
                exited.map_err(wait_error)?;
                reaped = true;
            },
            _ = tick.tick() => {
                if reaped && !group_alive(group) {
                    break;
                }
                if !killed && since.elapsed() >= limits.grace {
                    signal(group, libc::SIGKILL);
                    killed = true;
                }
            },
        }
    }
    let stop = since.elapsed();
    drain(&mut incoming, &mut on_line).await;
    Ok(Ended::Stopped {
        cancelled,
        stop,
        killed,
    })
}

/// Reads what is left in the pipes once the group is gone. A process that left the group
/// (`setsid`) may still hold a copy of a pipe, so a quiet pipe counts as closed.
async fn drain(
    incoming: &mut mpsc::UnboundedReceiver<(Pipe, String)>,
    on_line: &mut impl FnMut(Pipe, &str),
) {
    while let Ok(Some((pipe, line))) = tokio::time::timeout(QUIET_PIPE, incoming.recv()).await {
        on_line(pipe, &line);
    }
}

/// How long a pipe may stay silent after its group is gone before it counts as closed.
const QUIET_PIPE: Duration = Duration::from_millis(500);

/// How often a stopping group is checked for survivors.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// Sends `sig` to every process of the group. A group that is already gone is fine.
fn signal(group: libc::pid_t, sig: libc::c_int) {
    // SAFETY: killpg only sends a signal; a negative or stale group id makes it fail
    // with an error code, which is ignored on purpose (the group may be gone already).
    unsafe {
        libc::killpg(group, sig);
    }
}

/// Whether any process of the group is still running. Zombies do not count: an orphan
/// reparented to a PID 1 that never reaps stays a zombie forever, and it runs nothing.
fn group_alive(group: libc::pid_t) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // No /proc: the kernel's own answer, zombies included.
        // SAFETY: signal 0 only checks whether the group exists.
        return unsafe { libc::killpg(group, 0) } == 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| matches!(stat_state_and_group(&stat), Some((state, pgrp)) if pgrp == group && state != 'Z'))
}

/// The state and process group of a /proc/PID/stat line. The command name (field 2) is
/// in parentheses and may itself hold spaces and parentheses, so fields are counted from
/// its last closing parenthesis.
fn stat_state_and_group(stat: &str) -> Option<(char, libc::pid_t)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Sends each line of `pipe` to `lines` as it arrives, as text (invalid UTF-8 replaced).
fn forward(
    pipe: impl AsyncRead + Unpin + Send + 'static,
    which: Pipe,
    lines: mpsc::UnboundedSender<(Pipe, String)>,
) {
    tokio::spawn(async move {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.strip_suffix('\n').unwrap_or(&line);
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    if lines.send((which, line.to_string())).is_err() {
                        return;
                    }
                }
            }
        }
    });
}
