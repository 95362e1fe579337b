//! Just enough of the Redis protocol (RESP) to probe a server: `PING`, and
//! the `process_id` of `INFO server`, read from its bulk-string reply.

use std::io::{Read, Write};
use std::time::Duration;

use super::probe::connect;

/// Whether the server on `port` answers `PING` with `+PONG`.
pub(super) fn ping(port: u16, reply_timeout: Duration) -> bool {
    let Ok(mut stream) = connect(port, reply_timeout) else {
        return false;
    };
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

/// The `process_id` from `INFO server`.
pub(super) fn server_pid(port: u16, reply_timeout: Duration) -> Option<u32> {
    let mut stream = connect(port, reply_timeout).ok()?;
    stream.write_all(b"INFO server\r\n").ok()?;
    // A bulk string: `$<len>\r\n<len bytes>\r\n`.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
            continue;
        };
        let header = std::str::from_utf8(&buf[..eol]).ok()?;
        let len: usize = header.strip_prefix('$')?.parse().ok()?;
        if buf.len() < eol + 2 + len {
            continue;
        }
        let body = std::str::from_utf8(&buf[eol + 2..eol + 2 + len]).ok()?;
        return body
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok());
    }
}
