//! A server as a supervised child process, written once for every server:
//! started on a free port (another one when the port was taken), polled
//! until ready, stopped by pid with SIGTERM then SIGKILL, killed, started
//! again, and its log tail printed when a test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::logs::{read_from, tail};
use crate::process::free_port;
use crate::signal::{self, Signal};

/// How long a server may take to become ready before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// `start()` picks a new port this many times when the one it picked was
/// taken before the server could bind it.
const START_ATTEMPTS: usize = 5;

/// A server's child process. Behind a mutex so that `is_running` and
/// `pid` can take `&self`.
pub(super) struct ServerProcess {
    child: Mutex<Option<Child>>,
}

impl ServerProcess {
    fn new(child: Child) -> Self {
        ServerProcess {
            child: Mutex::new(Some(child)),
        }
    }

    fn none() -> Self {
        ServerProcess {
            child: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(Child::id)
    }

    /// `Some(status)` once the process has exited (or was never started).
    // "Running" (None) and "exited without a status" (Some(None)) differ.
    #[allow(clippy::option_option)]
    fn exit_status(&self) -> Option<Option<ExitStatus>> {
        match self.lock().as_mut() {
            None => Some(None),
            Some(child) => match child.try_wait() {
                Ok(Some(status)) => Some(Some(status)),
                Ok(None) => None,
                Err(_) => Some(None),
            },
        }
    }

    pub(super) fn is_running(&self) -> bool {
        self.exit_status().is_none()
    }

    /// SIGTERM, wait up to `STOP_GRACE`, then SIGKILL. Reaps the process.
    fn stop(&self) {
        let Some(mut child) = self.lock().take() else {
            return;
        };
        // Only while it is unreaped is the pid certainly this child's. A
        // failed SIGTERM means it has exited meanwhile: the loop sees that.
        if let Ok(None) = child.try_wait() {
            let _ = signal::send(&child, Signal::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// SIGKILL. Reaps the process.
    fn kill(&self) {
        if let Some(mut child) = self.lock().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Why a start attempt did not give a ready server.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    /// The port was taken before the server could bind it: try another.
    #[error("{0}")]
    PortTaken(String),
    /// Anything else: the test fails with this message.
    #[error("{0}")]
    Failed(String),
}

/// What differs between servers: how one is run and where it logs.
pub(super) trait ServerKind: Sized {
    /// The server's name in messages ("ZooKeeper").
    const NAME: &'static str;
    /// The log file, in the server's dir, that `log()` returns.
    const LOG_FILE: &'static str;

    /// Runs the server on `server.port()` (through
    /// [`Supervised::supervise`]) and waits until it is ready.
    fn spawn(server: &mut Supervised<Self>) -> Result<(), StartError>;
}

/// A server of kind `K`: its process, port and temp dir, and the state of
/// its kind. Killed when dropped; if the test is failing, the tail of its
/// log is printed then.
pub(super) struct Supervised<K: ServerKind> {
    pub(super) kind: K,
    process: ServerProcess,
    port: u16,
    dir: TempDir,
}

impl<K: ServerKind> Supervised<K> {
    /// A server that is not running yet, to run on `port` in `dir`.
    pub(super) fn new(kind: K, dir: TempDir, port: u16) -> Self {
        Supervised {
            kind,
            process: ServerProcess::none(),
            port,
            dir,
        }
    }

    /// Runs the server on a free port and waits until it is ready; tries
    /// another port when the one picked was taken before the server bound
    /// it. Panics (the test fails) on any other error.
    pub(super) fn start(kind: K, dir: TempDir) -> Self {
        let mut server = Supervised::new(kind, dir, 0);
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            server.port = free_port();
            match K::spawn(&mut server) {
                Ok(()) => return server,
                Err(StartError::PortTaken(msg)) => last = msg,
                Err(StartError::Failed(msg)) => panic!("cannot start {}: {msg}", K::NAME),
            }
        }
        panic!(
            "cannot start {}: every port tried was taken; last attempt: {last}",
            K::NAME
        )
    }

    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// The server's temp dir.
    pub(super) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The pid of the running server. Panics if it is not running.
    pub(super) fn pid(&self) -> u32 {
        self.process
            .pid()
            .unwrap_or_else(|| panic!("{} on port {} is not running", K::NAME, self.port))
    }

    pub(super) fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// SIGTERM, then SIGKILL after `STOP_GRACE`. Does nothing if the server
    /// is not running.
    pub(super) fn stop(&mut self) {
        self.process.stop();
    }

    /// SIGKILL (a crash, not a shutdown).
    pub(super) fn kill(&mut self) {
        self.process.kill();
    }

    /// Stops the server if it is running and runs it again on the same
    /// port. Panics (the test fails) if it does not become ready.
    pub(super) fn start_again(&mut self) {
        self.stop();
        self.respawn(&format!("start {} again", K::NAME));
    }

    /// Runs the (stopped) server again on the same port; a failure panics
    /// with "cannot `doing` on port …".
    pub(super) fn respawn(&mut self, doing: &str) {
        if let Err(e) = K::spawn(self) {
            panic!("cannot {doing} on port {}: {e}", self.port);
        }
    }

    /// The server's log, over all its starts.
    pub(super) fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    pub(super) fn log_path(&self) -> PathBuf {
        self.dir.path().join(K::LOG_FILE)
    }

    /// Makes `child` this server's process and polls until `ready(process)`
    /// says yes, the process exits, or `READY_TIMEOUT` passes. `log_since()`
    /// gives what the server logged since this start; an exit whose log
    /// says "Address already in use" is [`StartError::PortTaken`].
    pub(super) fn supervise(
        &mut self,
        child: Child,
        log_since: impl Fn() -> String,
        mut ready: impl FnMut(&ServerProcess) -> bool,
    ) -> Result<(), StartError> {
        self.process = ServerProcess::new(child);
        let what = format!("{} on port {}", K::NAME, self.port);
        let process = &self.process;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = process.exit_status() {
                let log = log_since();
                let status = status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string());
                let msg = format!(
                    "{what} exited ({status}) before it was ready; its log ends with:\n{}",
                    tail(&log)
                );
                return Err(if log.contains("Address already in use") {
                    StartError::PortTaken(msg)
                } else {
                    StartError::Failed(msg)
                });
            }
            if ready(process) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                process.kill();
                return Err(StartError::Failed(format!(
                    "{what} was not ready within {} s; its log ends with:\n{}",
                    READY_TIMEOUT.as_secs(),
                    tail(&log_since())
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl<K: ServerKind> Drop for Supervised<K> {
    fn drop(&mut self) {
        self.process.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- {} on port {} (a failing test): its log ends with:\n{}",
                K::NAME,
                self.port,
                tail(&self.log())
            );
        }
    }
}
