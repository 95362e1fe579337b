//! A real `redis-server` for record-cache tests: how it is run (no
//! persistence, its own dir and log) and judged ready (our own process
//! answers `PING`).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::logs::{file_len, open_log, read_from};
use super::probe::{ProbeTimeout, REPLY_TIMEOUT};
use super::process::{ServerKind, StartError, Supervised};
use super::redis_wire;

/// A `redis-server` on a free loopback port, without persistence, with its
/// dir and log in its own temp dir.
///
/// Use it for tests of the real record cache (the tail of its log is
/// printed if the test fails). [`stop`](Self::stop) +
/// [`start_again`](Self::start_again) is an outage on the same port after
/// which the cache is empty. Killed when dropped.
pub struct RedisServer {
    server: Supervised<Redis>,
}

/// Redis keeps nothing of its own between starts.
struct Redis;

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    /// Panics (the test fails) if it cannot, with the tail of its log.
    pub fn start() -> RedisServer {
        RedisServer {
            server: Supervised::start(Redis, Redis::new_dir()),
        }
    }

    /// The URL for a client: `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.server.port())
    }

    /// The port (the same across restarts).
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// The pid of the running `redis-server` (for signals a test sends
    /// itself, such as SIGSTOP). Panics if the server is not running.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.server.is_running()
    }

    /// Stops the server: SIGTERM, then SIGKILL after 10 s. Does nothing if
    /// it is not running.
    pub fn stop(&mut self) {
        self.server.stop();
    }

    /// Kills the server with SIGKILL (a crash, not a shutdown).
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Starts the server again on the same port (empty: nothing is
    /// persisted). Stops it first if it is running.
    pub fn start_again(&mut self) {
        self.server.start_again();
    }

    /// Whether the server answers `PING` with `+PONG` right now.
    pub fn ping(&self) -> bool {
        redis_wire::ping(self.server.port(), REPLY_TIMEOUT)
    }

    /// The server's log (its `--logfile`), over all its starts.
    pub fn log(&self) -> String {
        self.server.log()
    }

    /// Where the log is.
    pub fn log_path(&self) -> PathBuf {
        self.server.log_path()
    }
}

impl Redis {
    fn new_dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("xarchive-redis-")
            .tempdir()
            .expect("cannot create a temp dir for Redis")
    }
}

impl ServerKind for Redis {
    const NAME: &'static str = "Redis";
    const LOG_FILE: &'static str = "redis.log";

    fn spawn(server: &mut Supervised<Redis>) -> Result<(), StartError> {
        let log_path = server.log_path();
        // What the server prints before it opens its `--logfile`.
        let stdio_path = server.dir().join("redis.stdio.log");
        let log_start = file_len(&log_path);
        let stdio_start = file_len(&stdio_path);
        let out = open_log(&stdio_path);
        let err = out.try_clone().expect("cannot duplicate the log handle");
        let port = server.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(server.dir())
            .arg("--logfile")
            .arg(&log_path)
            .args(["--daemonize", "no"])
            .current_dir(server.dir())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `redis-server` (scripts/install-deps.sh installs it): {e}")
            });

        let log_since = || read_from(&stdio_path, stdio_start) + &read_from(&log_path, log_start);
        let mut timeout = ProbeTimeout::new();
        server.supervise(child, log_since, |process| {
            // PONG, from our own process (not some other server that took
            // the port).
            let pid = process.pid();
            timeout
                .probe(|t| redis_wire::ping(port, t).then_some(()))
                .is_some()
                && pid.is_some()
                && timeout.probe(|t| redis_wire::server_pid(port, t)) == pid
                && process.is_running()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A port someone else holds is reported as taken (so `start()` tries
    /// another), not as a failure.
    #[test]
    fn a_taken_port_is_retried_not_failed() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = holder.local_addr().unwrap().port();
        let mut redis = Supervised::new(Redis, Redis::new_dir(), taken);
        assert!(matches!(
            Redis::spawn(&mut redis),
            Err(StartError::PortTaken(_))
        ));
        drop(holder);
    }
}
