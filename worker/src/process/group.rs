//! One command as a process group of its own, from spawn to the moment nothing of it is
//! left: its output handed over as it comes, stopped as a group (SIGTERM, SIGKILL after the
//! grace), its orphans reaped, its guard released.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::supervisor::{self, Guard, Link};
use super::{Ended, Limits, Pipe, RunError, reaper};

/// A spawned group: its leader (tokio's child), the leader's pid (which is the group's id),
/// its guard, and its output as it arrives.
pub(super) struct Running {
    child: Child,
    group: libc::pid_t,
    guard: Option<Guard>,
    output: mpsc::UnboundedReceiver<(Pipe, Vec<u8>)>,
    program: String,
    /// The leader supervises the rest (bubblewrap around a step): a stop's SIGTERM goes to
    /// the others only, since the leader dying first would kill them all at once, with no
    /// grace to finish; it leaves when they are gone, or at SIGKILL with the rest.
    spares_leader: bool,
}

/// Spawns `command` as the leader of a new group, its output piped, with a guard that
/// kills the group if the worker dies. `stdin` is written to it whole and then closed;
/// without it stdin is /dev/null (codex waits for an open stdin to close).
pub(super) fn spawn(command: &mut Command, stdin: Option<String>) -> Result<Running, RunError> {
    reaper::adopt_orphans();
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let spawn_error = |source| RunError::Spawn {
        program: program.clone(),
        source,
    };
    let link = Link::new().map_err(spawn_error)?;
    let guard_fd = link.guard_fd();
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and makes system calls
    // only; the errors it returns are built from errno, without allocating.
    unsafe {
        command.pre_exec(move || {
            // A session of its own, so a group of its own, and no controlling terminal: a
            // step must not reach the terminal the worker was started from (a sandboxed
            // one could push keystrokes into it with TIOCSTI).
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The leader dies with the worker at once, even before its guard acts. (It
            // fires when the forking thread ends: tokio's worker threads live as long as
            // the runtime.)
            #[cfg(target_os = "linux")]
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The worker may have died between fork and prctl.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            supervisor::fork_guard(guard_fd)
        });
    }
    let mut child = command.spawn().map_err(spawn_error)?;
    let Some(group) = child.id().map(|pid| pid as libc::pid_t) else {
        unreachable!("a child that was just spawned and not yet waited for has a pid")
    };
    let guard = link.spawned(group);
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // Written aside, so a prompt larger than the pipe's buffer cannot stall the output;
        // dropping the pipe closes it, which tells the CLI the prompt is whole. A CLI that
        // exits before reading it all only makes the write fail.
        tokio::spawn(async move {
            let _ = pipe.write_all(text.as_bytes()).await;
        });
    }
    let (sender, output) = mpsc::unbounded_channel();
    if let Some(out) = child.stdout.take() {
        forward(out, Pipe::Stdout, sender.clone());
    }
    if let Some(err) = child.stderr.take() {
        forward(err, Pipe::Stderr, sender);
    }
    Ok(Running {
        child,
        group,
        guard: Some(guard),
        output,
        program,
        spares_leader: false,
    })
}

impl Running {
    /// See [`Running::spares_leader`].
    pub(super) fn sparing_leader(mut self, spare: bool) -> Running {
        self.spares_leader = spare;
        self
    }

    /// Runs the group until its leader exits, `cancel` fires or `limits.timeout` passes,
    /// handing each piece of output to `on_output` as it arrives; returns once nothing of
    /// the group is left.
    pub(super) async fn drive(
        mut self,
        limits: Limits,
        cancel: &CancellationToken,
        on_output: &mut impl FnMut(Pipe, &[u8]),
    ) -> Result<Ended, RunError> {
        let deadline = Instant::now() + limits.timeout;
        let mut reap = tokio::time::interval(REAP_EVERY);
        reap.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let cancelled = loop {
            tokio::select! {
                Some((pipe, bytes)) = self.output.recv() => on_output(pipe, &bytes),
                exited = self.child.wait() => {
                    let status = exited.map_err(|source| self.wait_error(source))?;
                    // The leader is done; whatever it left running in its group goes too,
                    // and then its pipes close.
                    signal(self.group, libc::SIGKILL);
                    self.settle().await;
                    self.drain(on_output).await;
                    return Ok(Ended::Exited(status));
                },
                _ = cancel.cancelled() => break true,
                _ = tokio::time::sleep_until(deadline) => break false,
                _ = reap.tick() => { reaper::reap_group(self.group, self.group); },
            }
        };

        let since = Instant::now();
        // Found before any signal: once the leader is gone they are reparented, and
        // nothing ties them to this run any more.
        let strays = strays(self.group);
        if self.spares_leader {
            signal_each(&members_but_leader(self.group), libc::SIGTERM);
        } else {
            signal(self.group, libc::SIGTERM);
        }
        signal_each(&strays, libc::SIGTERM);
        let mut killed = false;
        let mut reaped = false;
        let mut tick = tokio::time::interval(GROUP_POLL);
        loop {
            tokio::select! {
                Some((pipe, bytes)) = self.output.recv() => on_output(pipe, &bytes),
                exited = self.child.wait(), if !reaped => {
                    exited.map_err(|source| self.wait_error(source))?;
                    reaped = true;
                },
                _ = tick.tick() => {
                    reaper::reap_group(self.group, self.group);
                    if reaped && !group_alive(self.group) && !strays.iter().any(|p| running(*p)) {
                        break;
                    }
                    if !killed && since.elapsed() >= limits.grace {
                        signal(self.group, libc::SIGKILL);
                        signal_each(&strays, libc::SIGKILL);
                        killed = true;
                    }
                },
            }
        }
        let stop = since.elapsed();
        self.settle().await;
        self.drain(on_output).await;
        Ok(Ended::Stopped {
            cancelled,
            stop,
            killed,
        })
    }

    fn wait_error(&self, source: std::io::Error) -> RunError {
        RunError::Wait {
            program: self.program.clone(),
            source,
        }
    }

    /// Once the leader is reaped: waits for the rest of the group (already sent SIGKILL)
    /// to be gone, reaps the orphans among it, and releases the guard, which must never
    /// outlive the group's id.
    async fn settle(&mut self) {
        let since = Instant::now();
        loop {
            reaper::reap_group(self.group, self.group);
            if !group_alive(self.group) {
                break;
            }
            if since.elapsed() >= SETTLE_LIMIT {
                // A process stuck in the kernel (uninterruptible sleep) ignores even
                // SIGKILL for now. The guard is dropped without a goodbye, so it goes on
                // killing the group while it still exists; the run ends regardless.
                tracing::warn!(
                    program = %self.program,
                    group = self.group,
                    "part of the process group would not die within {SETTLE_LIMIT:?}"
                );
                self.guard = None;
                return;
            }
            tokio::time::sleep(GROUP_POLL).await;
            signal(self.group, libc::SIGKILL);
        }
        reaper::reap_group(self.group, self.group);
        if let Some(guard) = self.guard.take() {
            guard.release();
        }
    }

    /// Hands over what is left in the pipes once the group is gone. A process that left
    /// the group (`setsid`) may still hold a copy of a pipe, so a quiet pipe counts as
    /// closed.
    async fn drain(&mut self, on_output: &mut impl FnMut(Pipe, &[u8])) {
        while let Ok(Some((pipe, bytes))) =
            tokio::time::timeout(QUIET_PIPE, self.output.recv()).await
        {
            on_output(pipe, &bytes);
        }
    }
}

/// How long a pipe may stay silent after its group is gone before it counts as closed.
const QUIET_PIPE: Duration = Duration::from_millis(500);

/// How often a stopping group is checked for survivors.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How often a running group's orphans are reaped, so that a long step that keeps
/// orphaning short-lived processes does not pile up zombies until it ends.
const REAP_EVERY: Duration = Duration::from_millis(500);

/// How long the rest of a group may take to die after SIGKILL before the run ends anyway.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// Sends `sig` to every process of the group. A group that is already gone is fine.
fn signal(group: libc::pid_t, sig: libc::c_int) {
    // SAFETY: killpg only sends a signal; a stale group id makes it fail with an error
    // code, which is ignored on purpose (the group may be gone already).
    unsafe {
        libc::killpg(group, sig);
    }
}

/// The descendants of `leader` (leader of its group) that left the group: a CLI may run
/// its tools in a session of their own (gemini gives each shell command a pseudo-terminal),
/// out of reach of a signal to the group. A stop signals them one by one.
fn strays(leader: libc::pid_t) -> Vec<libc::pid_t> {
    let table = process_table();
    let mut family = vec![leader];
    let mut i = 0;
    while i < family.len() {
        let parent = family[i];
        family.extend(table.iter().filter(|p| p.parent == parent).map(|p| p.pid));
        i += 1;
    }
    family
        .into_iter()
        .filter(|pid| table.iter().any(|p| p.pid == *pid && p.group != leader))
        .collect()
}

/// The members of the group `leader` leads, but the leader.
fn members_but_leader(leader: libc::pid_t) -> Vec<libc::pid_t> {
    process_table()
        .into_iter()
        .filter(|p| p.group == leader && p.pid != leader)
        .map(|p| p.pid)
        .collect()
}

fn signal_each(pids: &[libc::pid_t], sig: libc::c_int) {
    for pid in pids {
        // SAFETY: kill only sends a signal; a process already gone makes it fail, which
        // is fine.
        unsafe {
            libc::kill(*pid, sig);
        }
    }
}

/// Whether process `pid` runs (a zombie does not).
fn running(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| parse_stat(pid, &stat))
        .is_some_and(|p| p.state != 'Z')
}

/// One line of the process table, from /proc/PID/stat.
struct Proc {
    pid: libc::pid_t,
    state: char,
    parent: libc::pid_t,
    group: libc::pid_t,
}

fn process_table() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(pid, &stat)
        })
        .collect()
}

/// The state, parent and process group of a /proc/PID/stat line. The command name (field
/// 2) is in parentheses and may itself hold spaces and parentheses, so fields are counted
/// from its last closing parenthesis.
fn parse_stat(pid: libc::pid_t, stat: &str) -> Option<Proc> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some(Proc {
        pid,
        state,
        parent,
        group,
    })
}

/// Whether any process of the group is still running. Zombies do not count: they run
/// nothing, and those that are ours are reaped apart from this.
fn group_alive(group: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks whether the group has any member, zombies included.
    if unsafe { libc::killpg(group, 0) } == -1
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    {
        return false;
    }
    if std::fs::metadata("/proc/self/stat").is_err() {
        // No /proc: the kernel's own answer, zombies included.
        return true;
    }
    process_table()
        .iter()
        .any(|p| p.group == group && p.state != 'Z')
}

/// Sends what `pipe` gives to `output` as it arrives, until it closes.
fn forward(
    mut pipe: impl AsyncRead + Unpin + Send + 'static,
    which: Pipe,
    output: mpsc::UnboundedSender<(Pipe, Vec<u8>)>,
) {
    tokio::spawn(async move {
        let mut buf = vec![0; 16 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if output.send((which, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
}
