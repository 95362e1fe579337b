//! Signals sent to child processes by pid (SIGTERM for a clean stop), with
//! `kill(2)` itself rather than by running the `kill` command.

use std::process::Child;

pub(crate) use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// Why a signal was not delivered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignalError {
    #[error("pid {0} is out of range for a signal")]
    Pid(u32),
    #[error("cannot send {signal} to pid {pid}: {errno}")]
    Kill {
        pid: u32,
        signal: Signal,
        errno: nix::errno::Errno,
    },
}

/// Sends `signal` to `child`. The caller must not have reaped it (a child
/// that exited but was not waited for keeps its pid, so the signal cannot
/// reach another process).
pub(crate) fn send(child: &Child, signal: Signal) -> Result<(), SignalError> {
    let pid = child.id();
    let raw = i32::try_from(pid).map_err(|_| SignalError::Pid(pid))?;
    nix::sys::signal::kill(Pid::from_raw(raw), signal).map_err(|errno| SignalError::Kill {
        pid,
        signal,
        errno,
    })
}
