//! Just enough of the ZooKeeper client protocol to probe a server: the
//! raw session handshake (jute `ConnectRequest`/`ConnectResponse`) and
//! `closeSession`, without a client library.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::probe::connect;

/// A ZooKeeper session as a server granted it, from the raw handshake of
/// [`ZooKeeperServer::open_session`](crate::ZooKeeperServer::open_session).
/// Only for checking what a server remembers; the code under test uses a
/// real client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkSession {
    /// The session id the server assigned.
    pub id: i64,
    /// The session timeout the server agreed to (it clamps the request to
    /// its min/max).
    pub timeout_ms: u32,
    password: Vec<u8>,
}

fn put_i32(buf: &mut Vec<u8>, v: i32) {
    buf.extend_from_slice(&v.to_be_bytes());
}

fn put_i64(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&v.to_be_bytes());
}

fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= 1 << 20)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad ZooKeeper frame length"))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(body)
}

pub(super) fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// The ZooKeeper client handshake (a jute `ConnectRequest`, answered by a
/// `ConnectResponse`). With `resume`, asks to reattach to that session;
/// `Ok(None)` means the server does not know it (expired).
pub(super) fn handshake(
    port: u16,
    timeout_ms: u32,
    resume: Option<&ZkSession>,
    reply_timeout: Duration,
) -> io::Result<(TcpStream, Option<ZkSession>)> {
    let mut stream = connect(port, reply_timeout)?;
    let (session_id, password) = match resume {
        Some(s) => (s.id, s.password.clone()),
        None => (0, vec![0u8; 16]),
    };
    let mut body = Vec::with_capacity(64);
    put_i32(&mut body, 0); // protocolVersion
    put_i64(&mut body, 0); // lastZxidSeen
    put_i32(&mut body, i32::try_from(timeout_ms).unwrap_or(i32::MAX));
    put_i64(&mut body, session_id);
    put_i32(&mut body, i32::try_from(password.len()).unwrap_or(0));
    body.extend_from_slice(&password);
    body.push(0); // readOnly = false
    let mut frame = Vec::with_capacity(body.len() + 4);
    put_i32(&mut frame, i32::try_from(body.len()).unwrap_or(0));
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;

    let reply = read_frame(&mut stream)?;
    // protocolVersion i32, timeOut i32, sessionId i64, passwd (i32 len + bytes), readOnly
    if reply.len() < 20 {
        return Err(invalid("short ZooKeeper ConnectResponse"));
    }
    let int = |at: usize| i32::from_be_bytes(reply[at..at + 4].try_into().unwrap_or_default());
    let timeout = int(4);
    let id = i64::from_be_bytes(reply[8..16].try_into().unwrap_or_default());
    let pw_len = usize::try_from(int(16)).map_err(|_| invalid("bad password length"))?;
    let password = reply
        .get(20..20 + pw_len)
        .ok_or_else(|| invalid("short ZooKeeper password"))?
        .to_vec();
    if timeout <= 0 || id == 0 {
        return Ok((stream, None));
    }
    let session = ZkSession {
        id,
        timeout_ms: u32::try_from(timeout).unwrap_or(0),
        password,
    };
    Ok((stream, Some(session)))
}

/// Sends `closeSession` on a handshaken connection and waits for the reply.
pub(super) fn close_session(stream: &mut TcpStream) -> io::Result<()> {
    let mut frame = Vec::with_capacity(12);
    put_i32(&mut frame, 8);
    put_i32(&mut frame, 1); // xid
    put_i32(&mut frame, -11); // OpCode.closeSession
    stream.write_all(&frame)?;
    read_frame(stream).map(drop)
}
