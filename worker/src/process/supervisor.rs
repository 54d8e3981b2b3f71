//! A guard per process group that kills the group when the worker goes away, however it
//! goes (SIGKILL, OOM, a panic that aborts).
//!
//! PR_SET_PDEATHSIG alone kills only the group's leader: the rest of the group (a test
//! runner, a dev server, a shell that ignores SIGTERM) would live on in a workspace whose
//! job is already running again on another worker. So every group gets a guard: a small
//! process forked from the group's leader before it execs (no second binary, which libtest
//! harnesses could not provide), outside the group, holding one end of a socket pair whose
//! other end only the worker holds. The worker dying closes its end; the guard reads EOF
//! and SIGKILLs the group. When the worker has seen the group gone it says goodbye (one
//! byte) instead and the guard exits without signalling: a group id the kernel may hand
//! out again is never signalled.
//!
//! Why not a cgroup per job: it needs a delegated, writable cgroup tree, which an
//! unprivileged container or a developer's shell usually does not have; the guard needs
//! nothing but fork.
//!
//! Everything between fork and exec runs in a copy of a multi-threaded process, so it
//! makes system calls only: no allocation, no locks, no formatting.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The guard's name in `ps` (at most 15 bytes).
const NAME: &[u8] = b"stepwise-guard\0";

/// The byte that tells the guard the group is gone and it may leave without signalling.
const GOODBYE: u8 = b'!';

/// Both ends of a guard's socket, while the group is being spawned. Dropped without
/// [`Link::spawned`] (the command could not start), it dismisses whatever guard was forked.
pub(super) struct Link {
    worker: Option<OwnedFd>,
    guard: Option<OwnedFd>,
}

impl Link {
    pub(super) fn new() -> io::Result<Link> {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into `fds`, which we own from then on.
        // CLOEXEC: no exec'd program may hold either end, or the worker's death would not
        // read as EOF.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and belong to nothing else.
        let (worker, guard) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Link {
            worker: Some(worker),
            guard: Some(guard),
        })
    }

    /// The descriptor the pre-exec code hands to the guard.
    pub(super) fn guard_fd(&self) -> RawFd {
        self.guard.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// Once the leader has exec'd: drops the worker's copy of the guard's end, and reads
    /// the guard's pid, which its parent wrote before the leader could exec.
    pub(super) fn spawned(mut self, group: libc::pid_t) -> Guard {
        self.guard = None;
        let worker = self.worker.take();
        let pid = worker.as_ref().and_then(guard_pid);
        Guard { worker, pid, group }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Not spawned: a leader that failed to exec has exited and been waited for, so
        // its group is gone, and a guard that was forked leaves without signalling.
        if let Some(worker) = self.worker.take() {
            let pid = guard_pid(&worker);
            goodbye(&worker);
            if let Some(pid) = pid
                && super::reaper::adopting()
            {
                super::reaper::reap_soon(pid, None);
            }
        }
    }
}

/// The guard's pid, which the guard's parent wrote before the leader could exec.
fn guard_pid(worker: &OwnedFd) -> Option<libc::pid_t> {
    let mut pid = [0u8; 4];
    // SAFETY: a non-blocking read into a local buffer of the stated length.
    let read = unsafe {
        libc::recv(
            worker.as_raw_fd(),
            pid.as_mut_ptr().cast(),
            pid.len(),
            libc::MSG_DONTWAIT,
        )
    };
    (read == 4).then(|| libc::pid_t::from_ne_bytes(pid))
}

fn goodbye(worker: &OwnedFd) {
    // SAFETY: a one-byte send from a static buffer; MSG_NOSIGNAL because a guard that is
    // already gone must not raise SIGPIPE in the worker.
    unsafe {
        libc::send(
            worker.as_raw_fd(),
            [GOODBYE].as_ptr().cast(),
            1,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        );
    }
}

/// The worker's hold on a running group's guard. Dropped without [`Guard::release`], the
/// guard kills the group: a run that is abandoned midway leaves nothing behind either.
pub(super) struct Guard {
    worker: Option<OwnedFd>,
    pid: Option<libc::pid_t>,
    group: libc::pid_t,
}

impl Guard {
    /// The group is gone: the guard leaves without signalling, and is reaped.
    pub(super) fn release(mut self) {
        if let Some(worker) = self.worker.take() {
            goodbye(&worker);
        }
        self.reap(None);
    }

    /// The guard is the worker's child only when the worker adopts orphans; otherwise its
    /// pid is not ours to wait for (and could, reused, be another child's). `group`: the
    /// group's orphans to reap once the guard is gone, when no run is left to do it.
    fn reap(&mut self, group: Option<libc::pid_t>) {
        if let Some(pid) = self.pid.take()
            && super::reaper::adopting()
        {
            super::reaper::reap_soon(pid, group);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing our end without a goodbye is what the worker's death looks like.
        self.worker = None;
        self.reap(Some(self.group));
    }
}

/// Runs in the group's leader after `setpgid` and before exec: forks the guard of the
/// group this process leads. The guard's parent writes the guard's pid to the socket and
/// exits at once, so the guard is nobody's child in the group and the leader can wait for
/// that parent before it execs.
///
/// # Safety
/// Only between fork and exec, in the single-threaded child; `guard_fd` is the guard's end
/// of a [`Link`].
pub(super) unsafe fn fork_guard(guard_fd: RawFd) -> io::Result<()> {
    // SAFETY (whole body): system calls only, on descriptors and memory of this process.
    unsafe {
        let group = libc::getpid();
        let middle = libc::fork();
        if middle == -1 {
            return Err(io::Error::last_os_error());
        }
        if middle == 0 {
            let guard = libc::fork();
            if guard == 0 {
                watch(guard_fd, group);
            }
            let ok = guard > 0
                && libc::send(
                    guard_fd,
                    guard.to_ne_bytes().as_ptr().cast(),
                    4,
                    libc::MSG_NOSIGNAL,
                ) == 4;
            libc::_exit(if ok { 0 } else { 1 });
        }
        let mut status = 0;
        while libc::waitpid(middle, &mut status, 0) == -1 {
            if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(io::Error::last_os_error());
            }
        }
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            // No guard, no run: a group that could outlive the worker is not started.
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
        Ok(())
    }
}

/// The guard itself: out of the group and the session, holding nothing but its socket,
/// deaf to the signals a terminal or a service manager sends the worker, it waits.
unsafe fn watch(socket: RawFd, group: libc::pid_t) -> ! {
    // SAFETY (whole body): system calls only; nothing here allocates or takes a lock.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        // The worker's own handlers (tokio's) write to descriptors the guard does not have.
        // 1..65: every signal number Linux has (glibc refuses its own two; that is fine).
        for sig in 1..65 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = match sig {
                    libc::SIGTERM | libc::SIGINT | libc::SIGHUP | libc::SIGQUIT | libc::SIGPIPE => {
                        libc::SIG_IGN
                    }
                    _ => libc::SIG_DFL,
                };
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());

        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, NAME.as_ptr());
        libc::chdir(c"/".as_ptr());
        // Only the socket stays open, as descriptor 0: a copy of the worker's end of any
        // other guard's socket, or of the step's output pipes, would keep them open.
        if socket != 0 && libc::dup2(socket, 0) == -1 {
            libc::_exit(2);
        }
        if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
            let mut limit: libc::rlimit = std::mem::zeroed();
            let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 20) as libc::c_int
            } else {
                4096
            };
            for fd in 1..top {
                libc::close(fd);
            }
        }

        let mut byte = 0u8;
        loop {
            match libc::read(0, (&mut byte as *mut u8).cast(), 1) {
                1 if byte == GOODBYE => libc::_exit(0),
                0 => break,
                -1 if *libc::__errno_location() == libc::EINTR => {}
                // Anything else: the worker's end is broken, which only its death does.
                _ => break,
            }
        }
        // The worker is gone. One SIGKILL reaches every member; the repeats cover a member
        // that was forking at that instant. Zombies keep a group "existing" without
        // running anything, so the repeats are bounded.
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        };
        for _ in 0..20 {
            if libc::killpg(group, libc::SIGKILL) == -1 {
                break;
            }
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
        libc::_exit(0)
    }
}
