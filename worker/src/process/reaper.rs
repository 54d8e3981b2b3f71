//! The worker adopts the orphans of what it starts, and reaps them.
//!
//! A step's grandchild whose parent exits (a shell's `cmd &`, a double fork, a parent
//! killed first) is an orphan; the kernel hands it to the nearest child subreaper, else to
//! PID 1. Where PID 1 never reaps (the worker as PID 1 in a container, a minimal init),
//! each one would stay a zombie. As a subreaper, the worker gets them instead and reaps
//! them itself.
//!
//! Only zombies it can name are reaped: members of one of its own groups (not their
//! leader, whose exit status tokio's wait takes) and its groups' guards. A blind
//! `waitpid(-1)` would steal the exit status of a child some other code is waiting for.
//! A descendant that leaves its group (`setsid`) also leaves this net, as it leaves the
//! group's signals.

use std::sync::OnceLock;
use std::sync::mpsc;

static ADOPTING: OnceLock<bool> = OnceLock::new();

/// Makes this process the child subreaper of everything it starts, once; returns whether
/// it is one (not where the kernel has no subreapers). Every run under the policy calls
/// it; a worker calls it at start too, so that it is so before its first job.
pub fn adopt_orphans() -> bool {
    *ADOPTING.get_or_init(|| {
        #[cfg(target_os = "linux")]
        // SAFETY: prctl with an integer argument changes only this process's attribute.
        let adopted = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) == 0 };
        #[cfg(not(target_os = "linux"))]
        let adopted = false;
        if !adopted {
            tracing::warn!(
                "this system has no child subreapers: orphans of a step are left to PID 1 to reap"
            );
        }
        adopted
    })
}

/// Whether orphans come to this process (then they are ours to reap).
pub(super) fn adopting() -> bool {
    ADOPTING.get().copied().unwrap_or(false)
}

/// Reaps every zombie child of ours in `group` except `leader`; returns how many.
pub(super) fn reap_group(group: libc::pid_t, leader: libc::pid_t) -> usize {
    let mut reaped = 0;
    loop {
        // SAFETY: waitid fills `info`, a zeroed local; WNOWAIT only looks, so whatever it
        // finds is still there to be reaped (or left to tokio, for the leader).
        let pid = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let found = libc::waitid(
                libc::P_PGID,
                group as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            if found != 0 {
                return reaped;
            }
            info.si_pid()
        };
        if pid == 0 || pid == leader {
            return reaped;
        }
        // SAFETY: `pid` is a zombie child of ours in our own group that nobody else waits for.
        if unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) } != pid {
            return reaped;
        }
        reaped += 1;
    }
}

/// Reaps `pid`, a child of ours that is about to exit (a guard), on a thread of its own so
/// that no run waits for it; then the orphans of `group`, if it names the group of a run
/// that was abandoned (its guard killed the group, and no run is left to reap it).
pub(super) fn reap_soon(pid: libc::pid_t, group: Option<libc::pid_t>) {
    type Job = (libc::pid_t, Option<libc::pid_t>);
    static REAPER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    let sender = REAPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("stepwise-reaper".into())
            .spawn(move || {
                for (pid, group) in rx {
                    // SAFETY: blocks until that one child of ours exits, and reaps it.
                    while unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) } == -1
                        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
                    {
                    }
                    // The guard leaves once its SIGKILLs found no one left but zombies.
                    if let Some(group) = group {
                        reap_group(group, group);
                    }
                }
            })
            .ok()
            .map(|_| tx)
    });
    if let Some(sender) = sender {
        let _ = sender.send((pid, group));
    }
}
