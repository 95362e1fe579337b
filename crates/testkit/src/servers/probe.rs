//! Loopback connections for readiness probes, with reply timeouts that
//! start short and grow on a slow machine.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a probe waits for a reply, unless told otherwise.
pub(super) const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Reply timeouts for readiness probes: short at first (a server that is
/// not ready yet, or another process on the port, may leave a probe
/// unanswered), doubled each time a probe times out (a loaded machine is
/// merely slow), at most 4 s.
pub(super) struct ProbeTimeout(Duration);

impl ProbeTimeout {
    pub(super) fn new() -> Self {
        ProbeTimeout(Duration::from_millis(250))
    }

    /// Runs `probe` with the current timeout; lengthens it if the probe
    /// failed by running out of time.
    pub(super) fn probe<T>(&mut self, probe: impl FnOnce(Duration) -> Option<T>) -> Option<T> {
        let started = Instant::now();
        let result = probe(self.0);
        if result.is_none() && started.elapsed() >= self.0 {
            self.0 = (self.0 * 2).min(Duration::from_secs(4));
        }
        result
    }
}

/// A connection to `127.0.0.1:port` whose reads and writes give up after
/// `reply_timeout`.
pub(super) fn connect(port: u16, reply_timeout: Duration) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&loopback(port), Duration::from_millis(500))?;
    stream.set_read_timeout(Some(reply_timeout))?;
    stream.set_write_timeout(Some(reply_timeout))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}
